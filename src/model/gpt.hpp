// GptModel: the part of a decoder (GPT-2 or Llama family, plan().shape) one rank holds (the model chunks of its pipeline stage, its
// tensor-parallel slice), its parameter and gradient arenas, activation slots, and the forward and
// backward pass of one micro-batch through one chunk, on the rank's device and in the run's precision.
// Pre-norm blocks: x -> x + proj(attn(norm1(x))) -> (.) + fcproj(act(fc(norm2(.)))) (or, in MoE blocks,
// the mixture of experts of norm2(.), model/moe_layer.hpp); final norm; LM head
// (the token embedding when tied); softmax cross-entropy. Norm LayerNorm or RMSNorm, act GELU or
// SwiGLU, attention multi-head or grouped-query with learned or rotary positions. All compute goes
// through the kernel table.
// Tensor parallelism follows Megatron: column-parallel qkv and fc, row-parallel proj and fcproj,
// vocab-parallel embedding and cross-entropy; with sequence parallelism the residual stream and the
// LayerNorms hold N/tp rows, and all-gather / reduce-scatter replace the all-reduces. With context
// parallelism a rank holds two chunks of every sample (ActivationDims), positions are the chunks'
// global ones, and attention is ring attention over the cp group (model/ring_attention).
// Precision (system.precision): the compute weights, activations and the messages between stages are
// of the storage type (fp32, bf16 or fp16; an fp8 run stores bf16 and runs its blocks' linear layers as
// fp8 GEMMs, model/linear_gemms.hpp); parameter gradients, statistics and the loss are fp32, and
// tensor-parallel partial sums are reduced in fp32 and rounded once, like the unsplit layer.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "comm/communicator.hpp"
#include "kernels/backend.hpp"
#include "model/micro_batch.hpp"
#include "model/moe_layer.hpp"
#include "parallel/tensor_parallel.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/arena.hpp"

namespace dtrain {

class KvDecoder;

class GptModel {
 public:
  virtual ~GptModel() = default;
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  // Forward of micro-batch `batch` (device memory) in `slot` through `chunk`. The first chunk of the
  // first stage embeds batch.tokens; other chunks read stage_input(slot). The last chunk of the last
  // stage adds the sum of the token losses to *batch.loss_sum (device memory; the host does not wait);
  // the chunk's output is stage_output(slot, chunk).
  virtual void forward(int slot, int chunk, const MicroBatch& batch) = 0;
  // Backward of that micro-batch through `chunk`. On the head, every token's loss is weighted by
  // loss_weight; elsewhere output_grad (Ns,C) is the gradient arriving from the next stage. Writes the
  // gradient of the chunk's input to input_grad (Ns,C), except on the first chunk of the first stage
  // (null there). Accumulates parameter gradients. Both buffers hold compute_type() elements.
  virtual void backward(int slot, int chunk, const MicroBatch& batch, float loss_weight, const void* output_grad,
                        void* input_grad) = 0;
  // The same backward in two halves, for the zero-bubble schedules (plan().activations.split_backward):
  // backward_input is backward() without the weight gradients of the linear layers (weights and biases:
  // every block's, the MoE router's and experts', the LM head's) and of the embedding, whose operands it
  // keeps in the slot (model/weight_grads.hpp); backward_weight(slot, chunk) then adds them, and the slot's
  // activations stay until it has. backward_input then backward_weight gives backward()'s values bit for bit.
  virtual void backward_input(int slot, int chunk, const MicroBatch& batch, float loss_weight, const void* output_grad,
                              void* input_grad) = 0;
  virtual void backward_weight(int slot, int chunk) = 0;
  // After the step's last backward: adds the tied head's own gradient buffer to wte's and zeroes it
  // (plan().separate_tied_head); nothing elsewhere.
  virtual void fold_tied_head_gradient() = 0;
  virtual void* stage_input(int slot) = 0;                    // (Ns,C)
  virtual const void* stage_output(int slot, int chunk) = 0;  // (Ns,C)
  // Row `row` of slot's logits (after a forward through the head) as fp32 on the host.
  virtual void logits_row(int slot, long row, float* out /*(Vl)*/) = 0;
  // Generation with a key/value cache for `batch` sequences of up to seq_length tokens over these
  // weights (model/kv_decoder.hpp); null where it does not apply (not the whole model on one rank, MoE
  // blocks with a capacity factor).
  virtual std::unique_ptr<KvDecoder> make_decoder(int batch) = 0;

  // The parameters of arena range r as fp32 values on the host (values: r.end - r.begin elements):
  // set rounds them to the storage type on the device, get widens them back. Without a range: the
  // whole arena (plan().arena_size elements, arena order).
  virtual void set_parameters(ArenaRange r, const float* values) = 0;
  virtual void get_parameters(ArenaRange r, float* values) = 0;
  void set_parameters(const float* values) { set_parameters({0, plan_.arena_size}, values); }
  void get_parameters(float* values) { get_parameters({0, plan_.arena_size}, values); }

  // Called around every use of a layer's parameters (blocks by global layer index, kEmbeddingLayer,
  // kHeadLayer; plan/buckets.hpp): before and after its forward, before its backward (a fully
  // recomputed group announces each block before its replay), and after its backward, when this
  // micro-batch's gradients of the layer are complete (the embedding announces only that); a split
  // backward announces the phases of plan/buckets.hpp's LayerPhase instead.
  void set_layer_hook(std::function<void(int, LayerPhase)> hook) { layer_hook_ = std::move(hook); }
  // MoE blocks' load-balancing losses and tokens per expert since the last reset (forward passes, not
  // their recomputation); empty tokens without MoE.
  MoeStats& moe_stats() { return moe_stats_; }

  const RankPlan& plan() const { return plan_; }
  const TensorTable& table() const { return plan_.table; }
  const StagePart& part() const { return plan_.part; }
  const ActivationDims& dims() const { return plan_.activations.dims; }
  int num_chunks() const { return static_cast<int>(plan_.part.chunks.size()); }
  virtual int num_slots() const = 0;
  Device& device() const { return params_.device(); }
  DType compute_type() const { return storage_dtype(plan_.precision); }
  Arena& params() { return params_; }  // the compute weights: arena_size elements of compute_type()
  Arena& grads() { return grads_; }    // fp32, grad_arena_size elements (the trainable tensors)
  // One activation or gradient between pipeline stages: (Ns,C) elements of compute_type().
  std::size_t message_count() const { return static_cast<std::size_t>(dims().Ns()) * static_cast<std::size_t>(dims().C); }

 protected:
  GptModel(const RankPlan& plan, Device& device);
  RankPlan plan_;
  Arena params_, grads_;
  void hook(int layer, LayerPhase phase) {
    if (layer_hook_) layer_hook_(layer, phase);
  }
  std::function<void(int, LayerPhase)> layer_hook_;
  MoeStats moe_stats_;
};

// The model `plan` describes, in plan.precision, on the device of `backend`. tp may be null (one rank
// per tensor-parallel group); cp (the context-parallel group) is needed when plan.sizes.cp > 1; dispatch
// moves MoE rows between ranks (null: every expert is local).
std::unique_ptr<GptModel> make_gpt_model(const RankPlan& plan, const TensorParallel* tp, kernels::Backend backend,
                                         Communicator* cp = nullptr, ExpertDispatch* dispatch = nullptr);

// Initial weights of every tensor of `table` (values: table.total() fp32 on the host, arena order) from
// the counter-based RNG keyed by (seed, tensor name, global element index): every layout starts from
// the same global weights.
void init_parameters(const TensorTable& table, std::uint64_t seed, float* values);
// The same values for arena range r only (values: r.end - r.begin elements; alignment gaps are 0).
void init_parameters(const TensorTable& table, std::uint64_t seed, ArenaRange r, float* values);

}  // namespace dtrain
