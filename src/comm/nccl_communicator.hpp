// The NCCL backend of the communication layer (CUDA builds): device buffers, one CUDA stream per
// group ordered after the compute stream, CUDA events as requests. Built collectively over an MPI
// split of `parent` (the unique id travels over MPI). With connect_neighbours (the pipeline group) the
// point-to-point connections to the previous and next rank of the ring are made at construction,
// all in one group, instead of lazily inside the first step's sends and receives.
// In builds without CUDA it is a fatal error.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/host_comm.hpp"
#include "runtime/trace.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

std::unique_ptr<Communicator> make_nccl_communicator(const std::string& name, HostComm parent, int color, int key,
                                                     std::vector<int> world_ranks, bool connect_neighbours, Watchdog* watchdog,
                                                     Trace* trace);

}  // namespace dtrain
