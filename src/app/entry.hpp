// The dtrain program: what main() runs. Kept in the library so tests can drive it.
#pragma once

namespace dtrain {

// MPI and Kokkos set-up, command line, input file, validation, then dry run, training or generation.
// Returns the process exit code (UserError: kUserErrorExit on every rank).
int dtrain_main(int argc, char** argv);

}  // namespace dtrain
