// TensorParallel: the collectives behind the f/g operators, through the group's communicator.
#include "parallel/tensor_parallel.hpp"

#include <algorithm>

namespace dtrain {

void TensorParallel::all_reduce(float* x, long n) const {
  if (size() == 1) return;
  group_.all_reduce(x, static_cast<std::size_t>(n), DType::f32, ReduceOp::sum, {"tensor-parallel all-reduce (sum)"});
}

void TensorParallel::all_reduce_max(float* x, long n) const {
  if (size() == 1) return;
  group_.all_reduce(x, static_cast<std::size_t>(n), DType::f32, ReduceOp::max, {"tensor-parallel all-reduce (max)"});
}

void TensorParallel::all_gather_rows(float* full, const float* shard, long rows, int cols) const {
  const long count = rows * cols;
  if (size() == 1) {
    if (full != shard) std::copy(shard, shard + count, full);
    return;
  }
  group_.all_gather(shard, full, static_cast<std::size_t>(count), DType::f32, {"sequence-parallel all-gather"});
}

void TensorParallel::reduce_scatter_rows(float* shard, const float* full, long rows, int cols) const {
  const long count = rows * cols;
  if (size() == 1) {
    if (full != shard) std::copy(full, full + count, shard);
    return;
  }
  group_.reduce_scatter(full, shard, static_cast<std::size_t>(count), DType::f32, {"sequence-parallel reduce-scatter"});
}

}  // namespace dtrain
