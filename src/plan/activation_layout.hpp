// The activation memory of a rank, laid out once: per "slot" (one micro-batch of one model chunk in
// flight) every tensor the backward pass reads, plus scratch buffers shared by all slots. One carving
// function both counts the floats (for the plan and the memory estimate) and hands out the pointers
// (for the model), so the two can never disagree.
// Sizes are per rank: N = B*T token rows, Ns = rows of the residual stream held here (N, or N/tp with
// sequence parallelism), Cl = C/tp, Fl = F/tp, NHl = NH/tp, Vl = V/tp.
#pragma once
#include <cstddef>
#include <vector>

namespace dtrain {

struct ActivationDims {
  int B, T, C, Cl, NHl, Fl, Vl;
  int seq_shards;  // tp with sequence parallelism, else 1
  long N() const { return static_cast<long>(B) * T; }
  long Ns() const { return N() / seq_shards; }
};

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
  float* stage_input;     // (Ns,C) embedding output, or the activation received from the previous stage
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

// The shape of a rank's activation arena.
struct ActivationLayout {
  ActivationDims dims{};
  int blocks_per_slot = 0;  // blocks of one model chunk
  bool head = false;        // the slots also hold the final norm and the logits
  int slots = 0;
  std::size_t floats() const;  // the whole arena (16-float aligned pieces)
};

// Carves `base` into the slots and scratch of `layout`; returns the floats used. With a null base it
// only counts (the pointers are then null).
std::size_t carve_activations(float* base, const ActivationLayout& layout, std::vector<SlotActs>& slots, Scratch& scratch);

}  // namespace dtrain
