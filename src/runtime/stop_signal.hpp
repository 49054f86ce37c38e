// Preemption: SIGUSR1 (Slurm's --signal=USR1@grace, or scancel --signal=USR1) and SIGTERM (a user,
// mpirun, or Slurm at the end of the time limit) ask the run to stop. The handler only records the
// signal; at the next step boundary the ranks agree (a collective) to stop together, save a checkpoint
// and exit with kPreemptedExit, which the sbatch scripts turn into a requeue. A second signal during
// the save changes nothing: the save is atomic either way.
#pragma once
#include <mpi.h>

namespace dtrain {

constexpr int kPreemptedExit = 3;

// Installs the recording handler, then unblocks both signals (the launcher blocked them; a pending one
// is recorded at once).
void install_stop_signal_handlers();
// Collective over comm: the signal any rank received (0 if none). Every rank gets the same answer.
int agree_on_stop_signal(MPI_Comm comm);
const char* signal_name(int signo);

}  // namespace dtrain
