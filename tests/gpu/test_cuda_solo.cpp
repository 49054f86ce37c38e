// SoloCommunicator on GPU memory: its copies are device to device (tests/support/solo_checks.hpp).
#include "support/solo_checks.hpp"

TEST_CASE("a one-rank group keeps or copies its own values in GPU memory", "[gpu][comm][solo]") {
  dtrain::testing::check_solo_communicator(dtrain::cuda_device());
}
