// GptModel: the part of a GPT decoder one rank holds (the model chunks of its pipeline stage, its
// tensor-parallel slice), its parameter and gradient arenas, activation slots, and the forward and
// backward pass of one micro-batch through one chunk.
// Pre-LN blocks: x -> x + proj(attn(ln1(x))) -> (.) + fcproj(gelu(fc(ln2(.)))); final LN; LM head tied
// to the token embedding; softmax cross-entropy. All compute goes through the kernel table.
// Tensor parallelism follows Megatron: column-parallel qkv and fc, row-parallel proj and fcproj,
// vocab-parallel embedding and cross-entropy; with sequence parallelism the residual stream and the
// LayerNorms hold N/tp rows, and all-gather / reduce-scatter replace the all-reduces.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "config/config.hpp"
#include "kernels/kernels.hpp"
#include "model/activations.hpp"
#include "model/arena.hpp"
#include "model/tensor_table.hpp"
#include "parallel/tensor_parallel.hpp"

namespace dtrain {

struct BlockParams {
  float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
};
struct ModelParams {
  float* wte = nullptr;  // (Vl,C)
  float* wpe = nullptr;  // (T,C)
  std::vector<BlockParams> blocks;  // in the order of part.layers()
  float* lnf_w = nullptr;
  float* lnf_b = nullptr;
};

class GptModel {
 public:
  // tp may be null (one rank per tensor-parallel group). Arenas are padded to a multiple of
  // `arena_multiple` elements (the data-parallel size, for the distributed optimizer's shards).
  GptModel(const Config& cfg, const StagePart& part, const TensorParallel* tp, int tp_rank, const kernels::KernelTable& k,
           int activation_slots, int arena_multiple = 1);

  // Weights from the counter-based RNG keyed by (seed, tensor name, global element index).
  void init_parameters(std::uint64_t seed);

  // Forward of the micro-batch in `slot` through `chunk`. The first chunk of the first stage embeds
  // slot.tokens; other chunks read slot.stage_input. Returns the sum of the token losses after the
  // last chunk of the last stage, else 0 (the chunk's output is stage_output(slot)).
  double forward(int slot, int chunk = 0);
  // Backward of that micro-batch through `chunk`. On the head, every token's loss is weighted by
  // loss_scale; elsewhere output_grad (Ns,C) is the gradient arriving from the next stage. Leaves the
  // gradient of the chunk's input in slot.grad_out. Accumulates parameter gradients.
  void backward(int slot, int chunk, float loss_scale, const float* output_grad = nullptr);
  // Called after each block's backward with its global layer index (gradient-ready hook).
  void set_block_backward_hook(std::function<void(int)> hook) { backward_hook_ = std::move(hook); }
  // Called before each block's forward with its global layer index (parameters-ready hook).
  void set_block_forward_hook(std::function<void(int)> hook) { forward_hook_ = std::move(hook); }

  float* stage_output(int slot, int chunk);

  const TensorTable& table() const { return table_; }
  const StagePart& part() const { return part_; }
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  Activations& activations() { return acts_; }
  const ActivationDims& dims() const { return acts_.dims(); }
  int num_chunks() const { return static_cast<int>(part_.chunks.size()); }
  // Tensors whose gradients are partial sums over the sequence shards (sequence parallelism): the
  // LayerNorm parameters. Their gradients must be summed over the tensor-parallel group.
  std::vector<const TensorSpec*> sequence_parallel_tensors() const;

 private:
  ModelParams views(Arena& arena) const;
  bool sp() const { return acts_.dims().seq_shards > 1; }
  int first_block(int chunk) const { return chunk * blocks_per_chunk_; }
  // LayerNorm of Ns rows into the full (N,C) `out` (all-gathered over the sequence when sharded).
  void norm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b);
  // Gradient of a LayerNorm output (N,C, partial over tp) into the residual-stream gradient dres.
  void norm_backward(float* dres, float* dw, float* db, float* dout_full, const float* x, const float* w,
                     const float* mean, const float* rstd);
  // Row-parallel output (N,C partial sums in `partial`) reduced into the residual stream `out` (Ns,C).
  void reduce_rows(float* out, float* partial);
  // The residual-stream gradient as full rows (N,C): gathered when sharded, else dres itself.
  const float* full_rows_grad();
  void block_forward(const BlockParams& p, const float* x, BlockActs& a);
  void block_backward(const BlockParams& p, const BlockParams& g, const float* x, BlockActs& a);
  float* block_input(SlotActs& s, int chunk, int i);

  const kernels::KernelTable& k_;
  const TensorParallel* tp_;
  StagePart part_;
  int blocks_per_chunk_;
  TensorTable table_;
  Arena params_, grads_;
  ModelParams p_, g_;
  Activations acts_;
  int vocab_start_;
  bool bias_owner_;  // adds the bias of row-parallel layers (tp rank 0)
  std::function<void(int)> forward_hook_, backward_hook_;
};

// Elements of a rank's parameter arena: the table padded to a multiple of 16 x `multiple` (the
// data-parallel size, so the distributed optimizer's slices stay aligned).
std::size_t padded_arena_size(const TensorTable& table, int multiple);

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

// Model FLOPs per token of a training step (forward + backward): 6 x parameters used in matmuls plus
// the attention matmuls 12 x layers x T x d. Counts the whole model (all ranks together).
double model_flops_per_token(const Config& cfg);

}  // namespace dtrain
