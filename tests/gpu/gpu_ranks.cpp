// prepare_ranks for the GPU tests: each rank selects a GPU (ranks on a node share GPUs round-robin).
// Without a visible GPU every rank says so and exits with 77, which CTest reports as skipped
// (SKIP_RETURN_CODE).
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>

#include "launch/launch_env.hpp"
#include "runtime/cuda_device.hpp"
#include "support/prepare_ranks.hpp"

namespace dtrain::testing {

int prepare_ranks() {
  int rank = 0, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  int visible = rc == cudaSuccess && devices > 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &visible, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!visible) {
    if (rank == 0) std::printf("no GPU visible (%s): skipping the GPU tests\n", rc == cudaSuccess ? "0 devices" : cudaGetErrorString(rc));
    return 77;
  }
  const LaunchEnv env = detect_launch_env(MPI_COMM_WORLD);
  select_cuda_device(env.local_rank, env.local_size, env.node_name, /*allow_shared_gpu=*/true);
  return 0;
}

}  // namespace dtrain::testing
