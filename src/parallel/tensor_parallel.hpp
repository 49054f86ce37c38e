// Tensor-parallel communication (Megatron's f and g operators), each with its forward and backward,
// all no-ops when the group has one rank. Rows are tokens: a (N, cols) activation is sharded along
// the sequence as tp contiguous blocks of N/tp rows (sequence parallel).
//
//   copy_to_tp_region          forward: identity          backward: all-reduce (sum)
//   reduce_from_tp_region      forward: all-reduce        backward: identity
//   gather_from_sp_region      forward: all-gather rows   backward: reduce-scatter rows
//   scatter_to_sp_region       forward: reduce-scatter    backward: all-gather rows
// The identities are not functions: the model simply does nothing there. Elements are T = float or
// bf16 (buffers on the rank's device); the model sums partial results in fp32 and moves bf16 rows.
#pragma once
#include "comm/communicator.hpp"

namespace dtrain {

class TensorParallel {
 public:
  explicit TensorParallel(Communicator& tp) : group_(tp) {}
  int size() const { return group_.size(); }
  int rank() const { return group_.rank(); }

  // f backward / g forward: x (n) summed over the group, in place.
  template <typename T>
  void all_reduce(T* x /*(n)*/, long n) const;
  void all_reduce_max(float* x /*(n)*/, long n) const;
  // full (size*rows, cols) <- every rank's shard (rows, cols), in rank order.
  template <typename T>
  void all_gather_rows(T* full, const T* shard, long rows, int cols) const;
  // shard (rows, cols) <- this rank's block of the sum over the group of full (size*rows, cols).
  template <typename T>
  void reduce_scatter_rows(T* shard, const T* full, long rows, int cols) const;

 private:
  Communicator& group_;
};

}  // namespace dtrain
