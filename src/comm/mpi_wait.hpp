// Waiting for MPI requests without taking the cores of the ranks that work. Open MPI's own waits poll
// without end; on a node with more ranks than cores it calls sched_yield between idle polls, and a
// yield hands the core to any process that computes for the rest of its time slice, so a collective
// whose ranks share cores with a busy process advances about one hop per slice (measured in
// docs/measurements/mpi-waits.json: 4 ranks on 2 cores beside one busy process, over 90 s instead of
// 6 s). mpi_wait_all polls for a short spin, as MPI_Waitall does, then sleeps between polls with a
// growing back-off, so a wait that lasts gives its core away until it ends. Every wait of dtrain's MPI
// traffic goes through it (blocking collectives are their nonblocking forms followed by mpi_wait).
//
// DTRAIN_MPI_WAIT chooses: auto (the default) sleeps where Open MPI yields (mpi_yield_when_idle: more
// ranks on the node than slots, or OMPI_MCA_mpi_yield_when_idle=1), poll always waits in MPI_Waitall,
// sleep always sleeps after the spin (a node whose cores other jobs also use, which Open MPI cannot see).
#pragma once
#include <mpi.h>

#include <functional>

namespace dtrain {

enum class WaitPolicy { automatic, poll, sleep };

// DTRAIN_MPI_WAIT's value (nullptr: unset, automatic); anything but auto, poll or sleep is a UserError.
WaitPolicy parse_wait_policy(const char* value);

// Whether this process's waits sleep after the spin: DTRAIN_MPI_WAIT, automatic resolved by Open MPI's
// mpi_yield_when_idle (false under another MPI). Decided at the first call (after MPI_Init).
bool mpi_waits_sleep();

void mpi_wait_all(int count, MPI_Request* requests);
inline void mpi_wait(MPI_Request& request) { mpi_wait_all(1, &request); }
// One blocking MPI operation: `start` issues its nonblocking form (checked) into the request, which is
// then waited for. Every blocking operation of dtrain is one call of this.
inline void mpi_blocking(const std::function<void(MPI_Request*)>& start) {
  MPI_Request r;
  start(&r);
  mpi_wait(r);
}
// Sleeps between polls from the start, whatever the policy: for waits during which nothing on the node
// may compute or spin (the ranks waiting while one measures the node's sgemm peak).
void mpi_wait_sleeping(MPI_Request& request);

}  // namespace dtrain
