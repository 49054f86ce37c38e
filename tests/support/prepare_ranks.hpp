// Set-up a test binary does on every rank after MPI_Init, before any test: defined once per binary
// (host tests: nothing; GPU tests: select a GPU, or skip when none is visible).
#pragma once

namespace dtrain::testing {

// 0 to run the tests, or the exit code every rank ends with instead (77: skipped).
int prepare_ranks();

}  // namespace dtrain::testing
