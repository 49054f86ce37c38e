// Preemption: SIGUSR1 (Slurm's --signal=USR1@grace, or scancel --signal=USR1) and SIGTERM (a user,
// mpirun, or Slurm at the end of the time limit) ask the run to stop. The handler only records the
// signal; at the next step boundary the ranks agree (a collective) to stop together, save a checkpoint
// and exit with kPreemptedExit, which the sbatch scripts turn into a requeue. A second signal during
// the save changes nothing: the save is atomic either way.
// Before the first step nothing is agreed on: StartupStop ends the job at most 5 s after the signal
// (exit kPreemptedExit) unless the ranks reach their first agreement sooner, so that a long start-up
// (a large model's initial weights, a checkpoint's load, a conversion, a layout search, calibrate, plan)
// does not outlast the scheduler's patience (Slurm's KillWait).
#pragma once
#include <condition_variable>
#include <mutex>
#include <thread>

namespace dtrain {

constexpr int kPreemptedExit = 3;

// Installs the recording handler, then unblocks both signals (the launcher blocked them; a pending one
// is recorded at once).
void install_stop_signal_handlers();
// The signal this process received (0 if none). The ranks agree on one with a collective maximum
// (host_values' all_reduce), so every rank gets the same answer.
int received_stop_signal();
const char* signal_name(int signo);

// From construction until done(), a thread of this rank watches for a stop signal; one that arrived
// more than `grace_s` ago ends the job: a message on stderr, then MPI_Abort with kPreemptedExit (every
// rank, nothing to save: nothing was trained). done() is called once the work can stop itself at its
// own points (the first step boundary's agreement; a generation's next token); the destructor calls it.
class StartupStop {
 public:
  explicit StartupStop(double grace_s = 5.0);
  ~StartupStop() { done(); }
  StartupStop(const StartupStop&) = delete;
  StartupStop& operator=(const StartupStop&) = delete;
  void done();

 private:
  std::mutex m_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread watcher_;
};

}  // namespace dtrain
