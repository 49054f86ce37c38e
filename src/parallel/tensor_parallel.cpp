// TensorParallel: the collectives behind the f/g operators, through the group's communicator.
#include "parallel/tensor_parallel.hpp"

namespace dtrain {

template <typename T>
void TensorParallel::all_reduce(T* x, long n) const {
  if (size() == 1) return;
  group_.all_reduce(x, static_cast<std::size_t>(n), dtype_of<T>(), ReduceOp::sum, {"tensor-parallel all-reduce (sum)"});
}

void TensorParallel::all_reduce_max(float* x, long n) const {
  if (size() == 1) return;
  group_.all_reduce(x, static_cast<std::size_t>(n), DType::f32, ReduceOp::max, {"tensor-parallel all-reduce (max)"});
}

template <typename T>
void TensorParallel::all_gather_rows(T* full, const T* shard, long rows, int cols) const {
  group_.all_gather(shard, full, static_cast<std::size_t>(rows * cols), dtype_of<T>(), {"sequence-parallel all-gather"});
}

template <typename T>
void TensorParallel::reduce_scatter_rows(T* shard, const T* full, long rows, int cols) const {
  group_.reduce_scatter(full, shard, static_cast<std::size_t>(rows * cols), dtype_of<T>(), {"sequence-parallel reduce-scatter"});
}

template void TensorParallel::all_reduce<float>(float*, long) const;
template void TensorParallel::all_reduce<bf16>(bf16*, long) const;
template void TensorParallel::all_reduce<fp16>(fp16*, long) const;
template void TensorParallel::all_gather_rows<float>(float*, const float*, long, int) const;
template void TensorParallel::all_gather_rows<bf16>(bf16*, const bf16*, long, int) const;
template void TensorParallel::all_gather_rows<fp16>(fp16*, const fp16*, long, int) const;
template void TensorParallel::reduce_scatter_rows<float>(float*, const float*, long, int) const;
template void TensorParallel::reduce_scatter_rows<bf16>(bf16*, const bf16*, long, int) const;
template void TensorParallel::reduce_scatter_rows<fp16>(fp16*, const fp16*, long, int) const;

}  // namespace dtrain
