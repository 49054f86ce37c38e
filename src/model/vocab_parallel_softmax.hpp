// The softmax cross-entropy's per-row statistics over a vocabulary split across the tensor-parallel
// group (Megatron's vocab-parallel cross-entropy): each row's maximum logit, sum of exponentials below
// it and target logit, global over the group, from each rank's slice of the logits; no rank ever
// holds full-vocabulary logits. Without tensor parallelism (tp null) one pass over the logits gives the
// maximum and the sum (xent_row_max_sum_exp); with it the maximum is reduced between two passes.
#pragma once
#include "kernels/kernels.hpp"
#include "parallel/tensor_parallel.hpp"

namespace dtrain {

template <typename T>
void vocab_parallel_softmax_stats(const kernels::KernelTable<T>& k, const TensorParallel* tp, float* row_max /*(N)*/,
                                  float* row_sum /*(N)*/, float* target_logit /*(N)*/, const T* logits /*(N,V)*/,
                                  const int* targets /*(N)*/, int vocab_start, long N, int V) {
  if (tp) {
    k.xent_row_max(row_max, logits, N, V);
    tp->all_reduce_max(row_max, N);
    k.xent_row_sum_exp(row_sum, logits, row_max, N, V);
  } else {
    k.xent_row_max_sum_exp(row_max, row_sum, logits, N, V);
  }
  k.xent_target_logit(target_logit, logits, targets, vocab_start, N, V);
  if (tp) {
    tp->all_reduce(row_sum, N);
    tp->all_reduce(target_logit, N);
  }
}

}  // namespace dtrain
