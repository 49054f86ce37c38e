// Activation memory of one micro-batch of one model chunk on one rank ("a slot"): every tensor the
// backward pass reads, laid out once by offset. A pipeline stage keeps as many slots as (micro-batch,
// chunk) pairs it holds in flight. Sizes are per rank: N = B*T token rows, Ns = rows of the residual
// stream held here (N, or N/tp with sequence parallelism), Cl = C/tp, Fl = F/tp, NHl = NH/tp, Vl = V/tp.
#pragma once
#include <cstddef>
#include <vector>

#include "model/arena.hpp"

namespace dtrain {

struct BlockActs {
  float* ln1_mean;  // (Ns)
  float* ln1_rstd;  // (Ns)
  float* ln1;       // (N,C)   LayerNorm output, gathered over the sequence when sharded
  float* qkv;       // (N,3*Cl)
  float* atty;      // (N,Cl)
  float* att;       // (B,NHl,T,T)
  float* res1;      // (Ns,C)  residual stream after attention
  float* ln2_mean;  // (Ns)
  float* ln2_rstd;  // (Ns)
  float* ln2;       // (N,C)
  float* fch;       // (N,Fl)
  float* fch_gelu;  // (N,Fl)
  float* res2;      // (Ns,C)  block output
};

struct SlotActs {
  int* tokens;            // (N) inputs of this micro-batch
  int* targets;           // (N)
  float* stage_input;     // (Ns,C) embedding output, or the activation received from the previous stage
  float* grad_out;        // (Ns,C) gradient to send to the previous stage
  std::vector<BlockActs> blocks;
  float* lnf_mean;        // (Ns)     head only
  float* lnf_rstd;        // (Ns)
  float* lnf;             // (N,C)
  float* logits;          // (N,Vl)  reused for dlogits
  float* row_max;         // (N)
  float* row_sum;         // (N)
  float* lse;             // (N)
  float* target_logit;    // (N)
};

// Buffers shared by all slots, used by one forward or backward pass at a time.
struct Scratch {
  float* dres;        // (Ns,C) gradient of the residual stream
  float* rows_full;   // (N,C)  partial sums before a reduction / gathered gradients
  float* rows_shard;  // (Ns,C) LayerNorm output before gathering / reduced gradients
  float* dln;         // (N,C)
  float* datty;       // (N,Cl)
  float* dqkv;        // (N,3*Cl)
  float* dfch;        // (N,Fl)
  float* dfch2;       // (N,Fl)
  float* dtt;         // (T,T) attention scratch
  float* dloss;       // (N) per-token loss weight
};

struct ActivationDims {
  int B, T, C, Cl, NHl, Fl, Vl;
  int seq_shards;  // tp with sequence parallelism, else 1
  long N() const { return static_cast<long>(B) * T; }
  long Ns() const { return N() / seq_shards; }
};

class Activations {
 public:
  Activations(const ActivationDims& dims, int blocks_per_slot, bool head, int slots);
  SlotActs& slot(int i) { return slots_[i]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  Scratch& scratch() { return scratch_; }
  const ActivationDims& dims() const { return dims_; }

 private:
  ActivationDims dims_;
  Arena arena_;
  std::vector<SlotActs> slots_;
  Scratch scratch_{};
};

}  // namespace dtrain
