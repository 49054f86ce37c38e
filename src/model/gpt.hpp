// GptModel: the part of a GPT decoder one rank holds (the model chunks of its pipeline stage, its
// tensor-parallel slice), its parameter and gradient arenas, activation slots, and the forward and
// backward pass of one micro-batch through one chunk.
// Pre-LN blocks: x -> x + proj(attn(ln1(x))) -> (.) + fcproj(gelu(fc(ln2(.)))); final LN; LM head tied
// to the token embedding; softmax cross-entropy. All compute goes through the kernel table.
// Tensor parallelism follows Megatron: column-parallel qkv and fc, row-parallel proj and fcproj,
// vocab-parallel embedding and cross-entropy; with sequence parallelism the residual stream and the
// LayerNorms hold N/tp rows, and all-gather / reduce-scatter replace the all-reduces.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/activations.hpp"
#include "model/micro_batch.hpp"
#include "parallel/tensor_parallel.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/arena.hpp"

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
  // The model part, arenas and activation slots `plan` describes. tp may be null (one rank per
  // tensor-parallel group).
  GptModel(const RankPlan& plan, const TensorParallel* tp, const kernels::KernelTable& k);

  // Weights from the counter-based RNG keyed by (seed, tensor name, global element index).
  void init_parameters(std::uint64_t seed);

  // Forward of micro-batch `batch` in `slot` through `chunk`. The first chunk of the first stage embeds
  // batch.tokens; other chunks read stage_input(slot). Returns the sum of the token losses after the
  // last chunk of the last stage, else 0 (the chunk's output is stage_output(slot, chunk)).
  double forward(int slot, int chunk, const MicroBatch& batch);
  // Backward of that micro-batch through `chunk`. On the head, every token's loss is weighted by
  // loss_scale; elsewhere output_grad (Ns,C) is the gradient arriving from the next stage. Writes the
  // gradient of the chunk's input to input_grad (Ns,C), except on the first chunk of the first stage
  // (null there). Accumulates parameter gradients.
  void backward(int slot, int chunk, const MicroBatch& batch, float loss_scale, const float* output_grad, float* input_grad);
  // Called after each block's backward with its global layer index (gradient-ready hook).
  void set_block_backward_hook(std::function<void(int)> hook) { backward_hook_ = std::move(hook); }
  // Called before each block's forward with its global layer index (parameters-ready hook).
  void set_block_forward_hook(std::function<void(int)> hook) { forward_hook_ = std::move(hook); }

  float* stage_input(int slot) { return acts_.slot(slot).stage_input; }  // (Ns,C)
  const float* stage_output(int slot, int chunk);                       // (Ns,C)
  const float* logits(int slot) { return acts_.slot(slot).logits; }     // (N,Vl) after a forward through the head

  const RankPlan& plan() const { return plan_; }
  const TensorTable& table() const { return plan_.table; }
  const StagePart& part() const { return plan_.part; }
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  const ActivationDims& dims() const { return acts_.dims(); }
  int num_chunks() const { return static_cast<int>(plan_.part.chunks.size()); }
  int num_slots() const { return acts_.num_slots(); }

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
  float* block_input(SlotActs& s, int i) { return i == 0 ? s.stage_input : s.blocks[static_cast<std::size_t>(i) - 1].res2; }

  const kernels::KernelTable& k_;
  const TensorParallel* tp_;
  RankPlan plan_;
  int blocks_per_chunk_;
  Arena params_, grads_;
  ModelParams p_, g_;
  Activations acts_;
  int vocab_start_;
  bool bias_owner_;  // adds the bias of row-parallel layers (tp rank 0)
  std::function<void(int)> forward_hook_, backward_hook_;
};

}  // namespace dtrain
