// SoloCommunicator on host memory (tests/support/solo_checks.hpp; the gpu tests run the same on a GPU).
#include "support/solo_checks.hpp"

TEST_CASE("a one-rank group keeps or copies its own values", "[comm][solo]") { dtrain::testing::check_solo_communicator(dtrain::host_device()); }
