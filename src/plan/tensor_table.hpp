// The tensor table: every parameter tensor a rank holds, with its global shape, its tensor-parallel
// slice and its offset in the rank's parameter arena. One table drives allocation, initialisation,
// optimizer grouping, checkpoint I/O and memory reports. Pure: no MPI, no memory but the table.
//
// Parameters (global shapes; C = hidden, F = ffn, V = vocab, T = seq_length, NH = heads, G = key/value
// heads, HD = C/NH, per layer l; [b] = only with model.add_bias_linear, [qb] = with add_bias_linear or
// add_qkv_bias, [LN] = only with LayerNorm):
//   wte (V,C) vocab-parallel (split dim 0), first stage (and last, tied)
//   wpe (T,C) replicated, first stage, learned_absolute positions only
//   h<l>.ln1_w (C), h<l>.ln1_b (C) [LN]
//   attention (HD = model.kv_channels, or C/NH; A = NH*HD, = C without kv_channels), G = NH: h<l>.qkv_w (3,A,C)
//     column-parallel (split dim 1, by heads), h<l>.qkv_b (3,A) [qb]
//   attention, G < NH (grouped-query): h<l>.q_w (NH*HD,C) split dim 0 and h<l>.kv_w (2,G*HD,C) split dim 1,
//     packed: a rank's kv_w slice follows its q_w slice in the arena, so the two are one (NHl+2Gl)*HD-row
//     weight; h<l>.q_b (NH*HD), h<l>.kv_b (2,G*HD) [qb], packed the same way
//   h<l>.qnorm_w (HD), h<l>.knorm_w (HD) replicated, model.qk_layernorm only (their gradients are partial over tp:
//     each rank normalises its own heads)
//   h<l>.proj_w (C,A) row-parallel (split dim 1), h<l>.proj_b (C) [b]
//   h<l>.ln2_w (C), h<l>.ln2_b (C) [LN]
//   MLP: h<l>.fc_w (F,C) column-parallel (split dim 0), h<l>.fc_b (F) [b]; with swiglu h<l>.fc_w (2,F,C)
//     split dim 1 ([gate; up] rows), h<l>.fc_b (2,F) [b]
//   h<l>.fcproj_w (C,F) row-parallel (split dim 1), h<l>.fcproj_b (C) [b]
//   MoE blocks (model.num_experts = E >= 1, block l with l % moe_layer_freq == 0) replace the MLP by a
//   router and E experts of width F' = moe_ffn_hidden_size, split over tp like the dense MLP and over
//   expert parallelism (ep) along dim 0, E/ep whole experts per rank (TensorSpec::expert):
//     h<l>.router_w (E,C) replicated (over tp and ep; the router computes in fp32, stored in the run's type)
//     h<l>.expert_fc_w (E,F',C) split dim 1, h<l>.expert_fc_b (E,F') [b]; with swiglu (E,2,F',C) split dim 2
//       ([gate; up] rows per expert) and (E,2,F') [b]
//     h<l>.expert_fcproj_w (E,C,F') split dim 2, h<l>.expert_fcproj_b (E,C) [b] replicated over tp
//   lnf_w, lnf_b [LN] (C) (last stage); the LM head is wte (tied) or lm_head (V,C) vocab-parallel (untied),
//   last stage.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "kernels/rope_frequencies.hpp"
#include "plan/pipeline_split.hpp"

namespace dtrain {

struct ModelShape {
  int num_layers, hidden, heads, ffn, seq_length, vocab;
  int kv_heads;           // key/value heads (= heads without grouped-query attention)
  bool rmsnorm = false;   // RMSNorm (no norm biases) instead of LayerNorm
  bool rope = false;      // rotary positions instead of the wpe table
  bool swiglu = false;    // gated MLP
  bool tied = true;       // the LM head is wte
  bool bias = true;       // biases of the linear layers
  bool qkv_bias = true;   // biases of the query, key and value projections (bias, or add_qkv_bias)
  float norm_eps = 1e-5f;
  kernels::RopeFrequencies rope_frequencies{};  // base theta, and Llama 3.1's scaling when it has one
  int rotary_dim = 0;     // dims of each head that RoPE turns
  int window = 0;         // sliding-window attention: keys a row sees at most (0: every earlier one)
  int window_skip = 0;    // model.window_attn_skip_freq: blocks l with (l + 1) % it == 0 see every key
  // Block `layer`'s window (0: none), as Megatron's is_layer_window_attention places them.
  int window_at(int layer) const { return window_skip > 0 && (layer + 1) % window_skip == 0 ? 0 : window; }
  // Keys a query row sees on average over the blocks, by the causal convention of T/2: (T^2 - (T-W)^2) / 2T
  // with a window W.
  double mean_visible_keys() const {
    const double T = seq_length;
    double sum = 0;
    for (int l = 0; l < num_layers; ++l) {
      const double W = window_at(l) > 0 && window_at(l) < seq_length ? window_at(l) : seq_length;
      sum += (T * T - (T - W) * (T - W)) / (2 * T);
    }
    return num_layers > 0 ? sum / num_layers : T / 2;
  }
  int experts = 0;        // model.num_experts (0 = dense MLP everywhere)
  int moe_ffn = 0;        // width of each expert's MLP
  std::string moe_blocks{};  // per block: '1' a MoE block, '0' a dense one (Config::moe_layer)
  int topk = 0;           // experts per token
  double moe_aux_coeff = 0.0;    // weight of the load-balancing loss (0 also with load-balancing type none)
  double capacity_factor = 0.0;  // 0 = dropless
  bool moe_renormalize = false;  // !model.moe_router_pre_softmax: the top-k weights sum to 1
  static ModelShape from(const Config& c);
  int hd = 0;             // dims per head (Config::head_dim)
  bool qk_norm = false;   // model.qk_layernorm
  std::vector<std::string> frozen{};  // training.freeze's patterns: tensors that do not train (plan/frozen_tensors.hpp)
  int head_dim() const { return hd; }
  bool moe(int layer) const { return experts > 0 && layer >= 0 && layer < static_cast<int>(moe_blocks.size()) && moe_blocks[static_cast<std::size_t>(layer)] == '1'; }
  bool grouped() const { return kv_heads != heads; }
};

enum class InitKind { normal, zeros, ones };

struct TensorSpec {
  std::string name;
  std::vector<long> global_shape;
  int split_dim = -1;              // dim divided across tensor-parallel ranks; -1 = replicated
  std::vector<long> local_shape;   // this rank's slice
  std::vector<long> local_offset;  // where the slice starts in the global tensor
  int layer = -1;                  // transformer block, -1 for embeddings and the final norm
  bool weight_decay = true;        // false for biases and LayerNorm parameters
  InitKind init = InitKind::normal;
  float init_std = 0.0f;
  std::size_t offset = 0;          // element offset in the parameter arena
  std::size_t numel = 0;           // elements of the local slice
  // An expert tensor: dim 0 indexes the experts and is split over expert parallelism (this rank holds
  // experts [local_offset[0], local_offset[0] + local_shape[0])); its gradient is not summed over the
  // ranks that hold other experts (the expert-data-parallel group reduces it).
  bool expert = false;
  bool trainable = true;  // false: training.freeze names it (no gradient, optimizer state or master copy)
};

// What part of the model a rank holds: v chunks of consecutive blocks (v = 1 without interleaving).
struct StagePart {
  std::vector<std::vector<int>> chunks;  // global block indices per model chunk, in execution order
  bool embedding = false;                // wte (+ wpe) before chunk 0: first stage
  bool head = false;                     // lnf + the LM head after the last chunk: last stage
  std::vector<int> layers() const;       // all blocks of all chunks
};

// The blocks of pipeline stage `stage`: chunk c holds split.chunk_blocks(stage) consecutive blocks from
// split.chunk_begin(stage, c) (even: [(c*pp + s)*k, (c*pp + s + 1)*k) with k = L / (pp*v), the
// interleaved assignment; v = 1 gives contiguous blocks).
StagePart stage_part(const PipelineSplit& split, int stage);

class TensorTable {
 public:
  // Tensors start on 16-float boundaries; each layer's group of tensors (a block's experts a group of
  // their own, and the embedding and head groups) on a multiple of bucket_alignment (16 x the
  // data-parallel size), so that gradient buckets
  // split into equal, aligned data-parallel slices. Expert tensors are sliced over ep_size expert-parallel
  // ranks (this one ep_rank) along dim 0. Frozen tensors (shape.frozen) lie after every trainable one,
  // from a multiple of bucket_alignment: the trainable ones are [0, trainable_total()), the index space of
  // the gradient arena, its buckets and the optimizer's ranges; without frozen tensors the layout is the
  // same as if none could be.
  TensorTable(const ModelShape& shape, const StagePart& part, int tp_size, int tp_rank, std::size_t bucket_alignment = 16,
              int ep_size = 1, int ep_rank = 0);
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const TensorSpec& get(const std::string& name) const;
  const TensorSpec* find(const std::string& name) const;
  std::size_t total() const { return total_; }                      // the parameter arena's elements
  std::size_t trainable_total() const { return trainable_total_; }  // the trainable tensors' (a prefix)

 private:
  // packed: placed right after the previous tensor, without alignment (one weight with it); expert: an
  // expert tensor (dim 0 split over ep).
  void add(std::string name, std::vector<long> shape, int split_dim, int layer, bool decay, InitKind init, float std,
           bool packed = false, bool expert = false);
  // The router and experts of MoE block l (prefix "h<l>.").
  void add_moe(const ModelShape& s, const std::string& prefix, int layer, float std_w, float std_res);
  // Marks the frozen tensors and gives every tensor its offset: the trainable ones first, in table order.
  void place(const std::vector<std::string>& frozen);
  int tp_size_, tp_rank_, ep_size_, ep_rank_;
  std::size_t bucket_alignment_;
  std::vector<TensorSpec> tensors_;
  std::vector<char> packed_;  // per tensor: placed right after the previous one (add's packed)
  std::size_t total_ = 0, trainable_total_ = 0;
};

// Global element index of local element `i` of a tensor slice (row-major in both).
long global_index(const TensorSpec& t, long i);

// Local elements [begin, begin + count) of a slice as runs that are contiguous in the slice and in
// the global tensor (pieces of rows of the last dimension): fn(local_index, global_index, length).
template <typename Fn>
void for_each_run(const TensorSpec& t, long begin, long count, Fn fn) {
  const long row = t.local_shape.empty() ? 1 : t.local_shape.back();
  for (long i = begin, end = begin + count; i < end;) {
    const long len = std::min(row - i % row, end - i);
    fn(i, global_index(t, i), len);
    i += len;
  }
}

}  // namespace dtrain
