// Preemption: SIGUSR1 (Slurm's --signal=USR1@grace, or scancel --signal=USR1) and SIGTERM (a user,
// mpirun, or Slurm at the end of the time limit) ask the run to stop. The handler only records the
// signal; at the next step boundary the ranks agree (a collective) to stop together, save a checkpoint
// and exit with kPreemptedExit, which the sbatch scripts turn into a requeue. A second signal during
// the save changes nothing: the save is atomic either way.
#pragma once

namespace dtrain {

constexpr int kPreemptedExit = 3;

// Installs the recording handler, then unblocks both signals (the launcher blocked them; a pending one
// is recorded at once).
void install_stop_signal_handlers();
// The signal this process received (0 if none). The ranks agree on one with a collective maximum
// (host_values' all_reduce), so every rank gets the same answer.
int received_stop_signal();
const char* signal_name(int signo);

}  // namespace dtrain
