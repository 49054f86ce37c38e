// The activation memory of a rank, laid out once: per "slot" (one micro-batch of one model chunk in
// flight) every tensor the backward pass reads, plus scratch buffers shared by all slots. One carving
// function both counts the bytes (for the plan and the memory estimate) and hands out the pointers
// (for the model), so the two can never disagree. Activations are of the run's storage type T (float
// or bf16); statistics (LayerNorm mean and rstd, the softmax's max, sum, log-sum-exp) are float.
// Sizes are per rank: N = B*T token rows (T = seq_length/cp: with context parallelism a rank holds two
// chunks of T/2 rows of every sample), Ns = rows of the residual stream held here (N, or N/tp with
// sequence parallelism), Cl = NH*HD/tp (the attention's width on the rank: C/tp unless model.kv_channels), Fl = F/tp, NHl = NH/tp, NKVl = key/value heads/tp, Vl = V/tp,
// QKVl = (NHl + 2*NKVl)*HD, Hl = Fl (2*Fl with SwiGLU). MoE blocks: E experts, K choices per token,
// Fe = expert width / tp, He = Fe (2*Fe with SwiGLU), R = N*K rows routed to experts: the dropless worst
// case (with a capacity fewer rows are used; the sizes do not depend on the data). These sizes hold for
// expert parallelism 1, where a rank's experts receive exactly its own tokens' rows.
// Recomputation (model.recompute_*) changes only where pointers lead: a selective block's MLP
// activation, and everything of a fully recomputed group's blocks but the last
// block's output, point into shared scratch (the replay workspace), which the backward pass refills by
// rerunning the forward kernels; the kept tensors are the same ones at the same places.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/choices.hpp"

namespace dtrain {

// A run of a rank's token rows that are consecutive positions of their samples: `samples` samples of
// `rows` rows each, starting at token row `row`, the first at position `position` of its sequence.
struct RowChunk {
  long row;
  int samples, rows, position;
};

struct ActivationDims {
  int B, T, C, Cl, NHl, NKVl, Fl, Vl;
  int seq_shards;  // tp with sequence parallelism, else 1
  bool gated;      // SwiGLU: the MLP's first layer is 2*Fl wide (2*Fe in MoE blocks)
  // Context parallelism: the sequence is cut into 2*cp chunks; the rank of index cp_rank holds chunks
  // cp_rank and 2*cp-1-cp_rank (the zig-zag assignment: every rank has the same causal-attention work)
  // as its rows [0, T/2) and [T/2, T) of each sample.
  int cp = 1, cp_rank = 0;
  int E = 0, K = 0, Fe = 0;  // MoE blocks: experts, choices per token, expert width on this rank
  int ep = 1;                // expert-parallel ranks (the experts' rows come from all of them)
  int tp = 1;                // tensor-parallel ranks
  long N() const { return static_cast<long>(B) * T; }
  // The global chunk of a rank's half (0 or 1) of each sample, and that chunk's first position.
  static int zigzag_chunk(int cp, int rank, int half) { return half == 0 ? rank : 2 * cp - 1 - rank; }
  int chunk_position(int half) const { return zigzag_chunk(cp, cp_rank, half) * (T / 2); }
  // The rank's rows as runs of consecutive positions: all of them at once (cp = 1), else each half
  // sample at its chunk's position.
  std::vector<RowChunk> row_chunks() const {
    if (cp == 1) return {{0, B, T, 0}};
    std::vector<RowChunk> out;
    for (int b = 0; b < B; ++b)
      for (int half = 0; half < 2; ++half) out.push_back({static_cast<long>(b) * T + half * (T / 2), 1, T / 2, chunk_position(half)});
    return out;
  }
  long Ns() const { return N() / seq_shards; }
  int HD() const { return Cl / NHl; }
  int QKVl() const { return (NHl + 2 * NKVl) * HD(); }  // the packed [q | k | v] row of this rank
  int Hl() const { return gated ? 2 * Fl : Fl; }         // the MLP's first-layer outputs
  int He() const { return gated ? 2 * Fe : Fe; }         // an expert's first-layer outputs
  long R() const { return N() * K; }                      // rows routed to experts (at most)
  // Rows the rank's experts compute at most: its own R under ep = 1; with expert parallelism every
  // rank of the EP group may route all its rows here (dropless worst case).
  long Re() const { return R() * ep; }
};

// What a MoE block keeps for its backward pass.
template <typename T>
struct MoeActs {
  float* probs;  // (N,E)  router softmax
  int* idx;      // (N,K)  chosen experts
  float* w;      // (N,K)  their probabilities (routing weights)
  int* pos;      // (N,K)  row of each assignment in expert-major order, -1 dropped
  int* src;      // (R)    token of each row
  float* row_w;  // (R)    routing weight of each row
  T* xin;        // (R,C)  the experts' input rows, token side
  T* fch;        // (Re,He) first layer (expert side: the rows this rank's experts compute)
  T* act;        // (Re,Fe) GELU or SwiGLU output
  float* out;    // (Re,C)  expert outputs (fp32, partial over tp)
  float* y;      // (R,C)   the same outputs back on the token side (out itself when ep = 1)
};

// MoE scratch, used by one block's forward or backward at a time.
template <typename T>
struct MoeScratch {
  float* logits;  // (N,E)  router logits; their gradient in backward
  float* dw;      // (N,K)  routing weights' gradient
  float* daux;    // (E)    load-balancing loss gradient per expert
  float* x32;     // (N,C)  bf16 runs: the router input widened to fp32 (null in fp32 runs)
  float* w32;     // (E,C)  bf16 runs: the router weight widened to fp32 (null in fp32 runs)
  T* drows;       // (R,C)  weighted output gradient rows
  // Expert parallelism (null when ep = 1, where the expert side is the token side): the rows the
  // dispatch brings to this rank's experts (their input, then their output gradient) and the input
  // gradient rows it brings back.
  T* xe;          // (Re,C)
  T* de;          // (Re,C)
  float* dxt;     // (R,C)
  T* dact;        // (Re,Fe)
  T* dfch;        // (Re,He)
  float* dxin;    // (Re,C)  input gradient rows, expert side (fp32, partial over tp)
};

template <typename T>
struct BlockActs {
  float* ln1_mean;  // (Ns)    LayerNorm only
  float* ln1_rstd;  // (Ns)
  T* ln1;           // (N,C)   norm output, gathered over the sequence when sharded
  T* qkv;           // (N,QKVl) after RoPE when the model rotates
  T* q_raw;         // (N,NHl*HD) qk_layernorm: the queries before their norm (null without)
  T* k_raw;         // (N,NKVl*HD) and the keys
  float* q_rstd;    // (N,NHl) their norms' 1/rms per row and head
  float* k_rstd;    // (N,NKVl)
  T* atty;          // (N,Cl)
  float* lse;       // the attention softmax's log-sum-exp per query row: (B,NHl,T), with context
                    // parallelism (B,2,NHl,T/2) (per half sample)
  T* res1;          // (Ns,C)  residual stream after attention
  float* ln2_mean;  // (Ns)
  float* ln2_rstd;  // (Ns)
  T* ln2;           // (N,C)
  T* fch;           // (N,Hl)  dense blocks
  T* fch_gelu;      // (N,Fl)  GELU or SwiGLU output
  T* res2;          // (Ns,C)  block output
  MoeActs<T> moe;   // MoE blocks
};

template <typename T>
struct SlotActs {
  T* stage_input;         // (Ns,C) embedding output, or the activation received from the previous stage
  std::vector<BlockActs<T>> blocks;
  float* lnf_mean;        // (Ns)     head only
  float* lnf_rstd;        // (Ns)
  T* lnf;                 // (N,C)
  T* logits;              // (N,Vl)  reused for dlogits
  float* row_max;         // (N)
  float* row_sum;         // (N)
  float* lse;             // (N)
  float* target_logit;    // (N)
  // A split backward (zero-bubble schedules): where B copies what W needs that does not live in the
  // slot (output gradients, recomputed and gathered inputs); null otherwise. [begin, end) is the slot.
  char* kept = nullptr;
  std::size_t kept_bytes = 0;
  const char* begin = nullptr;
  const char* end = nullptr;
};

// Buffers shared by all slots, used by one forward or backward pass at a time.
template <typename T>
struct Scratch {
  T* dres;            // (Ns,C) gradient of the residual stream
  T* rows_full;       // (N,C)  partial sums before a reduction / gathered gradients
  T* rows_shard;      // (Ns,C) LayerNorm output before gathering / reduced gradients
  T* dln;             // (N,C)
  T* datty;           // (N,Cl)
  T* dqkv;            // (N,QKVl)
  T* dfch;            // (N,Hl)
  T* dfch2;           // (N,Fl)
  T* qk_out;          // (N,max(NHl,NKVl)*HD) qk_layernorm: a norm's output, then its input gradient (null without)
  T* qk_dy;           // (N,max(NHl,NKVl)*HD) its output gradient
  float* dtt;         // attention scratch (fp32): kernels::attention_scratch_floats(B,T,NHl), with context
                      // parallelism also a ring step's scores and their gradient (NHl,2,T/2,T/2)
  // Context parallelism (null without): the key/value rows travelling around the ring (two, one in
  // use and one arriving), their fp32 gradient accumulators, and the fp32 attention output (forward)
  // or query gradient (backward) of the rank's rows.
  T* ring_kv[2];        // (N,2*NKVl*HD)
  float* ring_dkv[2];   // (N,2*NKVl*HD)
  float* ring_acc;      // (N,Cl)
  float* dloss;       // (N) per-token loss weight
  // bf16 runs: the fp32 partial sums of tensor-parallel layers before they are reduced and rounded
  // (row-parallel outputs, column-parallel input gradients). fp32 runs sum in the T buffers (null here).
  float* partial;        // (N,C)
  float* partial_shard;  // (Ns,C) this rank's rows of the reduced partial sums (sequence parallel)
  // Recomputation: the blocks of the largest fully recomputed group (full), or one block's MLP
  // activation (selective); empty / null without.
  std::vector<BlockActs<T>> replay;
  T* fch_gelu;        // (N,Fl)      selective
  MoeScratch<T> moe;  // null without MoE blocks
  // precision=fp8 (null otherwise): a linear layer's GEMM operands as fp8 codes (model/linear_gemms.hpp),
  // its input, weight and output gradient, each as it is and transposed, and their amaxes.
  std::uint8_t *fp8_x, *fp8_x_t;    // (N, max(C,Cl,Fl)), transposed
  std::uint8_t *fp8_w, *fp8_w_t;    // (max(QKVl,Hl), C), transposed
  std::uint8_t *fp8_dy, *fp8_dy_t;  // (N, max(QKVl,C,Hl)), transposed
  float* fp8_amax;                  // (3): input, weight, output gradient
};

// The shape of a rank's activation arena.
struct ActivationLayout {
  ActivationDims dims{};
  int blocks_per_slot = 0;  // blocks of one model chunk
  bool head = false;        // the slots also hold the final norm and the logits
  int slots = 0;
  Precision precision = Precision::fp32;
  RecomputeGranularity recompute = RecomputeGranularity::none;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  int recompute_layers = 1;
  bool split_backward = false;  // the schedule splits backwards into B and W: every slot also keeps W's operands
  bool qk_norm = false;         // model.qk_layernorm: blocks keep their queries and keys before the norm
  // Per block position of a chunk: kDenseMlp and/or kMoeMlp, the MLPs the blocks at that position have in
  // this rank's chunks (both when chunks differ). Empty = every block dense.
  std::vector<unsigned char> mlp_kinds;
  unsigned char mlp_kind(int position) const;
  std::size_t bytes() const;  // the whole arena (64-byte aligned pieces)
  // What one slot keeps for a split backward's W (SlotActs::kept), 64-byte pieces: every linear layer's
  // output gradient, and its input where that is not in the slot (recomputed, gathered, MoE scratch),
  // for the worst case of the chunk's blocks (MoE: every routed row), and the embedding's gradient.
  std::size_t kept_bytes() const;
  // Full recomputation: the groups [begin, end) of a chunk's blocks that keep only the group's input
  // (and the last block's output, the next block's input); blocks in no group keep everything.
  std::vector<std::pair<int, int>> recompute_groups() const;
};

constexpr unsigned char kDenseMlp = 1, kMoeMlp = 2;

// Carves `base` into the slots and scratch of `layout` (T matching layout.precision); returns the bytes
// used. With a null base it only counts (the pointers are then null).
template <typename T>
std::size_t carve_activations(void* base, const ActivationLayout& layout, std::vector<SlotActs<T>>& slots, Scratch<T>& scratch);

}  // namespace dtrain
