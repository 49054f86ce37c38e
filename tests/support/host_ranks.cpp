// prepare_ranks for the host test binaries: nothing to prepare.
#include "support/prepare_ranks.hpp"

namespace dtrain::testing {

int prepare_ranks() { return 0; }

}  // namespace dtrain::testing
