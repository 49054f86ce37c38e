// The single error path of dtrain.
// - UserError: a mistake in the user's input that every rank detects the same way (config, layout).
//   main() catches it; rank 0 prints it once and every rank exits with kUserErrorExit.
// - fatal(): anything a single rank discovers (I/O, library failure, bad data). It prints the message
//   prefixed with the rank and calls MPI_Abort, so srun/mpirun end every rank: no hang.
// - The checked-call macro for MPI reports the call, file:line and the library's own message (HDF5
//   calls go through ckpt/h5_file, whose errors name the file, the cause and the line).
#pragma once
#include <stdexcept>
#include <string>

namespace dtrain {

// Exit codes, one per failure class (docs/ARCHITECTURE.md, Errors and exit codes); 3, a stop by
// signal with its checkpoint, is runtime/stop_signal's kPreemptedExit.
constexpr int kFatalExit = 1;         // one rank's failure (a library, an internal error): MPI_Abort
constexpr int kUserErrorExit = 2;     // bad input of any kind: retrying cannot help
constexpr int kHangExit = 4;          // the hang watchdog ended the job: a restart may succeed
constexpr int kNonFiniteExit = 5;     // a non-finite loss or gradient norm: not to be retried blindly

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A step whose loss or gradient norm is not finite, thrown by every rank together before the optimizer
// step: training.on_nonfinite decides between a rollback and the end (exit kNonFiniteExit).
class NonFiniteStep : public UserError {
 public:
  NonFiniteStep(int step_1based, const std::string& what) : UserError(what), step(step_1based) {}
  int step;
};

// Prints "dtrain: rank R: <line>" on stderr and ends the whole job with `code` (MPI_Abort; exit before
// MPI_Init or after MPI_Finalize): the fatal tier, the hang watchdog, a stop signal during start-up.
[[noreturn]] void end_job(int code, const std::string& line);
// end_job(kFatalExit, "error: <message>").
[[noreturn]] void fatal(const std::string& message);

// Implementation of the checked-call macro.
void check_mpi(int rc, const char* call, const char* file, int line);

}  // namespace dtrain

#define MPI_CHECK(call) ::dtrain::check_mpi((call), #call, __FILE__, __LINE__)
