// Consistency checks of a Config against the job size. Every problem becomes one line that names the
// key and the fix; all of them are reported together in one UserError.
#pragma once
#include "config/config.hpp"

namespace dtrain {

// Throws UserError listing every problem found. Does not resolve micro_batch_size=auto (plan does).
void validate_config(const Config& cfg, int world_size);

}  // namespace dtrain
