// Consistency of the configuration with the job: parallel sizes that fit the number of ranks and
// divide the model's dimensions, a batch that splits into micro-batches, a valid rank order, and
// training.freeze's patterns against the model's tensors (plan/frozen_tensors.hpp). Pure
// (the world size is a number). Every problem is one line naming the key and a fix; all are reported
// together. Sizes are multiplied in 64 bits after each was checked against the world size, so no
// product can overflow.
#pragma once
#include "config/config.hpp"

namespace dtrain {

// Throws UserError listing every problem. Does not resolve micro_batch_size=auto (make_plan does).
void check_layout(const Config& cfg, int world_size);

}  // namespace dtrain
