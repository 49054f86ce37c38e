// The MPI backend of the communication layer over every rank of the job, on host memory: for tests of
// code that takes a Communicator (at one rank too, a group of one).
#pragma once
#include <mpi.h>

#include <memory>
#include <numeric>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/parallel_state.hpp"

namespace dtrain::testing {

inline std::unique_ptr<MpiCommunicator> mpi_over_world(const CommOptions& options = {}) {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<int> everyone(static_cast<std::size_t>(world));
  std::iota(everyone.begin(), everyone.end(), 0);
  return std::make_unique<MpiCommunicator>("all", MPI_COMM_WORLD, 0, rank, everyone, nullptr, nullptr, options.synchronous_sends,
                                           host_device(), options.stage_through_host);
}

}  // namespace dtrain::testing
