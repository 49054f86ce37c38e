// Ring attention: causal self-attention of a rank's rows under context parallelism. Every sample's
// sequence is cut into 2*cp chunks and the rank of index r holds chunks r and 2cp-1-r (ActivationDims:
// rows [0, T/2) and [T/2, T) of each sample), so every rank has the same causal work. The key/value rows
// travel once around the cp ring: at step s a rank holds those of rank r - s, attends with its query
// chunks to the visible chunks among them (an earlier chunk whole, its own chunk causally) while the
// next rank's arrive, and merges each block into its running output and log-sum-exp (online softmax).
// Backward goes round again with the key/values, recomputing each block's probabilities from the kept
// log-sum-exp; the key/value gradients travel with their rows and arrive home after the last step.
// Everything outside attention is local to the rank's rows. Each query row sees the keys from its first
// visible key on (kernels/attention_visibility.hpp: its document's start, its sliding window; sample
// positions); a pair of chunks wholly outside every row's window is skipped.
#pragma once
#include "comm/communicator.hpp"
#include "kernels/kernels.hpp"
#include "plan/activation_layout.hpp"

namespace dtrain {

template <typename T>
class RingAttention {
 public:
  RingAttention(const kernels::KernelTable<T>& k, Communicator& cp, const ActivationDims& d) : k_(k), cp_(cp), d_(d) {}

  // atty (N,Cl) <- attention of the rank's query rows of qkv (N,QKVl) over the whole sequences;
  // lse (B,2,NHl,T/2) keeps the log-sum-exp for the backward pass. visible: what the rows see (its
  // doc_start (N) or null: the sample position where each row's document starts; the window).
  void forward(T* atty, float* lse, const T* qkv, kernels::KeyVisibility visible, Scratch<T>& sc);
  // dqkv (N,QKVl) <- the gradient of qkv, from datty (N,Cl) and the forward's atty and lse.
  void backward(T* dqkv, const T* datty, const T* atty, const float* lse, const T* qkv, kernels::KeyVisibility visible,
                Scratch<T>& sc);

 private:
  int kv_width() const { return 2 * d_.NKVl * d_.HD(); }
  // Calls f(half of the query rows, half of the key/value rows, their chunks' sample positions) for the
  // chunk pairs visible at ring step `step` (the key/values of rank cp_rank - step): causal, and not
  // wholly before the window (0: none) of the query chunk's first row.
  template <typename F>
  void visible_pairs(int step, int window, F f) const;

  const kernels::KernelTable<T>& k_;
  Communicator& cp_;
  ActivationDims d_;
};

}  // namespace dtrain
