// TensorParallel: the collectives behind the f/g operators, through the group's MPI communicator.
#include "parallel/tensor_parallel.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace dtrain {

void TensorParallel::all_reduce(float* x, long n) const {
  if (size() == 1) return;
  auto w = watch(watchdog_, {"allreduce (sum)", "tp", -1, n * 4L});
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x, static_cast<int>(n), MPI_FLOAT, MPI_SUM, group_.comm()));
}

void TensorParallel::all_reduce_max(float* x, long n) const {
  if (size() == 1) return;
  auto w = watch(watchdog_, {"allreduce (max)", "tp", -1, n * 4L});
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x, static_cast<int>(n), MPI_FLOAT, MPI_MAX, group_.comm()));
}

void TensorParallel::all_gather_rows(float* full, const float* shard, long rows, int cols) const {
  const long count = rows * cols;
  if (size() == 1) {
    if (full != shard) std::copy(shard, shard + count, full);
    return;
  }
  auto w = watch(watchdog_, {"allgather", "tp", -1, count * 4L});
  MPI_CHECK(MPI_Allgather(shard, static_cast<int>(count), MPI_FLOAT, full, static_cast<int>(count), MPI_FLOAT, group_.comm()));
}

void TensorParallel::reduce_scatter_rows(float* shard, const float* full, long rows, int cols) const {
  const long count = rows * cols;
  if (size() == 1) {
    if (full != shard) std::copy(full, full + count, shard);
    return;
  }
  auto w = watch(watchdog_, {"reduce-scatter", "tp", -1, count * 4L * size()});
  MPI_CHECK(MPI_Reduce_scatter_block(full, shard, static_cast<int>(count), MPI_FLOAT, MPI_SUM, group_.comm()));
}

}  // namespace dtrain
