// GptModel: the part of a GPT decoder one rank holds (a pipeline stage, a tensor-parallel slice), its
// parameter and gradient arenas, activation slots, and the forward/backward pass of one micro-batch.
// Pre-LN blocks: x -> x + proj(attn(ln1(x))) -> (.) + fcproj(gelu(fc(ln2(.)))); final LN; LM head tied
// to the token embedding; softmax cross-entropy. All compute goes through the kernel table.
#pragma once
#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "kernels/kernels.hpp"
#include "model/activations.hpp"
#include "model/arena.hpp"
#include "model/tensor_table.hpp"

namespace dtrain {

struct BlockParams {
  float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
};
struct ModelParams {
  float* wte = nullptr;  // (Vl,C)
  float* wpe = nullptr;  // (T,C)
  std::vector<BlockParams> blocks;
  float* lnf_w = nullptr;
  float* lnf_b = nullptr;
};

class GptModel {
 public:
  GptModel(const Config& cfg, const StagePart& part, int tp_size, int tp_rank, const kernels::KernelTable& k,
           int activation_slots);

  // Weights from the counter-based RNG keyed by (seed, tensor name, global element index).
  void init_parameters(std::uint64_t seed);

  // Forward of the micro-batch whose tokens/targets are in `slot`. Returns the sum of the token losses
  // (last stage), else 0.
  double forward(int slot);
  // Backward of that micro-batch; every token's loss is weighted by loss_scale. Accumulates gradients.
  void backward(int slot, float loss_scale);

  const TensorTable& table() const { return table_; }
  const StagePart& part() const { return part_; }
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  Activations& activations() { return acts_; }
  const ActivationDims& dims() const { return acts_.dims(); }

 private:
  ModelParams views(Arena& arena) const;
  float* block_input(SlotActs& s, int i) { return i == 0 ? s.stage_input : s.blocks[i - 1].res2; }
  void block_forward(const BlockParams& p, const float* x, BlockActs& a);
  void block_backward(const BlockParams& p, const BlockParams& g, const float* x, BlockActs& a);

  const kernels::KernelTable& k_;
  StagePart part_;
  TensorTable table_;
  Arena params_, grads_;
  ModelParams p_, g_;
  Activations acts_;
  int vocab_start_;
};

// Global element index of local element `i` of a tensor slice (row-major in both).
long global_index(const TensorSpec& t, long i);

// Model FLOPs per token of a training step (forward + backward): 6 x parameters used in matmuls plus
// the attention matmuls 12 x layers x T x d. Counts the whole model (all ranks together).
double model_flops_per_token(const Config& cfg);

}  // namespace dtrain
