// Catch2's own main, for the readers' unit tests (tests/CMakeLists.txt: reader_unit_tests), which need
// neither MPI nor the kernels' runtime.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
