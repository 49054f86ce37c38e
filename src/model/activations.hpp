// Activation memory of one micro-batch on one rank ("a slot"): every tensor the backward pass reads,
// laid out once by offset. A pipeline stage keeps as many slots as micro-batches it holds in flight.
// Sizes are per rank: Cl = C/tp channels of attention, Fl = F/tp, NHl = NH/tp, Vl = V/tp.
#pragma once
#include <cstddef>
#include <vector>

#include "model/arena.hpp"
#include "model/tensor_table.hpp"

namespace dtrain {

struct BlockActs {
  float* ln1;       // (N,C)
  float* ln1_mean;  // (N)
  float* ln1_rstd;  // (N)
  float* qkv;       // (N,3*Cl)
  float* atty;      // (N,Cl)
  float* att;       // (B,NHl,T,T)
  float* res1;      // (N,C)  residual after attention
  float* ln2;       // (N,C)
  float* ln2_mean;  // (N)
  float* ln2_rstd;  // (N)
  float* fch;       // (N,Fl)
  float* fch_gelu;  // (N,Fl)
  float* res2;      // (N,C)  block output
};

struct SlotActs {
  int* tokens;            // (N) inputs of this micro-batch
  int* targets;           // (N)
  float* stage_input;     // (N,C) embedding output, or the activation received from the previous stage
  std::vector<BlockActs> blocks;
  float* lnf;             // (N,C)   last stage only
  float* lnf_mean;        // (N)
  float* lnf_rstd;        // (N)
  float* logits;          // (N,Vl)  last stage only; reused for dlogits
  float* row_max;         // (N)
  float* row_sum;         // (N)
  float* lse;             // (N)
  float* target_logit;    // (N)
};

// Buffers shared by all slots, used during one backward pass at a time.
struct BackwardScratch {
  float* dres;    // (N,C) gradient of the residual stream
  float* dln;     // (N,C)
  float* datty;   // (N,Cl)
  float* dqkv;    // (N,3*Cl)
  float* dfch;    // (N,Fl)
  float* dfch2;   // (N,Fl)
  float* dtt;     // (T,T) attention scratch
  float* dloss;   // (N) per-token loss weight
};

struct ActivationDims {
  int B, T, C, Cl, NHl, Fl, Vl;
  long N() const { return static_cast<long>(B) * T; }
};

class Activations {
 public:
  Activations(const ActivationDims& dims, int num_blocks, bool head, int slots);
  SlotActs& slot(int i) { return slots_[i]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  BackwardScratch& scratch() { return scratch_; }
  const ActivationDims& dims() const { return dims_; }
  std::size_t bytes() const { return arena_.bytes(); }

 private:
  ActivationDims dims_;
  Arena arena_;
  std::vector<SlotActs> slots_;
  BackwardScratch scratch_{};
};

}  // namespace dtrain
