// GptModelImpl<T>: the model of gpt.hpp for storage type T (float, bf16 or fp16): forward/backward for
// one micro-batch on one rank, in llm.c's order of kernels. One block design covers GPT-2 and the Llama
// family: LayerNorm or RMSNorm, learned positions or RoPE (applied to the packed queries and keys after
// the QKV product), GELU or SwiGLU MLP, multi-head or grouped-query attention, tied or separate LM head,
// with or without linear biases (plan_.shape). The forward pass and the rest are in gpt.cpp (which
// instantiates the class), the backward pass in gpt_backward.cpp (which instantiates its functions).
// Generation with a key/value cache (kv_decoder.cpp) runs the same forward pass over a decode step's
// rows (decode): one block routine for training and decoding, whose attention reads the micro-batch's
// own keys, the cp ring's, or the cache's. Only those three files include this one.
#pragma once
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/kernels.hpp"
#include "model/activations.hpp"
#include "model/dense_mlp.hpp"
#include "model/gpt.hpp"
#include "model/kv_cache.hpp"
#include "model/kv_decoder_factory.hpp"
#include "model/linear_gemms.hpp"
#include "model/linear_output.hpp"
#include "model/moe_layer.hpp"
#include "model/param_views.hpp"
#include "model/ring_attention.hpp"
#include "model/weight_grads.hpp"

namespace dtrain {

template <typename T>
class GptModelImpl final : public GptModel {
 public:
  GptModelImpl(const RankPlan& plan, const TensorParallel* tp, kernels::Backend backend, Communicator* cp, ExpertDispatch* dispatch)
      : GptModel(plan, device_for(backend)),
        k_(kernels::kernel_table<T>(backend)),
        tp_(tp && tp->size() > 1 ? tp : nullptr),
        blocks_per_chunk_(plan.activations.blocks_per_slot),
        p_(views(plan_, params_.as<T>())),
        g_(views(plan_, grads_.as<float>(), /*trainable_only=*/true)),
        acts_(plan.activations, device()),
        vocab_start_(plan.coords.tp * plan.activations.dims.Vl),
        bias_owner_(plan.coords.tp == 0),
        pass_(plan.activations.dims),
        replay_from_(plan.activations.blocks_per_slot, -1),
        head_grad_(device(), plan.separate_tied_head ? sizeof(float) * static_cast<std::size_t>(plan.activations.dims.Vl) *
                                                         static_cast<std::size_t>(plan.activations.dims.C)
                                                   : 0),
        frozen_norm_grads_(device(), frozen_norm_floats(plan) * sizeof(float)),
        wg_(k_),
        linear_(k_, wg_, acts_.scratch(), tp_, cp),
        dense_(k_, linear_, plan.activations.dims, plan.shape.swiglu, bias_owner_,
               plan.activations.recompute == RecomputeGranularity::selective) {
    if (plan.activations.dims.cp > 1) {
      if (!cp || cp->size() != plan.activations.dims.cp) fatal("internal error: context parallelism without its group");
      ring_ = std::make_unique<RingAttention<T>>(k_, *cp, plan.activations.dims);
    }
    if (plan.shape.experts > 0)
      moe_ = std::make_unique<MoeLayer<T>>(plan_, backend, tp_, cp, dispatch ? *dispatch : local_dispatch_, device(), moe_stats_);
    if (moe_) moe_->use_weight_grads(wg_);
    if (plan.separate_tied_head) g_.head = head_grad_.as<float>();
    for (int i = 0; i < acts_.num_slots(); ++i) {
      const SlotActs<T>& s = acts_.slot(i);
      wg_.add_slot(s.kept, s.kept_bytes, s.begin, s.end);
    }
    for (const auto& [begin, end] : plan.activations.recompute_groups()) replay_from_[static_cast<std::size_t>(end - 1)] = begin;
  }

  void forward(int slot, int chunk, const MicroBatch& batch) override;
  void backward(int slot, int chunk, const MicroBatch& batch, float loss_weight, const void* output_grad, void* input_grad) override {
    backward_pass(slot, chunk, batch, loss_weight, output_grad, input_grad);
  }
  void backward_input(int slot, int chunk, const MicroBatch& batch, float loss_weight, const void* output_grad,
                      void* input_grad) override {
    if (!plan_.activations.split_backward) fatal("internal error: a split backward in a plan without one");
    wg_.begin(slot);
    backward_pass(slot, chunk, batch, loss_weight, output_grad, input_grad);
    wg_.end();
  }
  void fold_tied_head_gradient() override {
    if (!plan_.separate_tied_head) return;
    const long n = static_cast<long>(dims().Vl) * dims().C;
    const kernels::KernelTable<float>& kf = kernels::kernel_table<float>(device().backend());
    kf.residual_forward(g_.wte, g_.wte, g_.head, n);  // wte's embedding sum + the head's, as the embedding group adds them
    kf.zero(g_.head, n);
  }
  void backward_weight(int slot, int) override {
    wg_.run(slot, [this](int layer, bool before) { hook(layer, before ? LayerPhase::before_weight_grad : LayerPhase::after_weight_grad); });
  }
  void* stage_input(int slot) override { return acts_.slot(slot).stage_input; }
  const void* stage_output(int slot, int) override { return block_input(acts_.slot(slot), blocks_per_chunk_); }
  void logits_row(int slot, long row, float* out) override;
  std::unique_ptr<KvDecoder> make_decoder(int batch) override { return make_kv_decoder<T>(*this, batch); }
  // A decode pass (KvDecoder): n rows (at most the micro-batch's; rows.tokens and rows.positions given,
  // device memory) through the embedding, every block (attending to and extending `cache`, whose
  // pieces say which rows are which sequence's) and the final norm, in activation slot 0. Whole model,
  // one rank.
  void decode(const MicroBatch& rows, long n, KvCache<T>& cache);
  // The logits of row `row` of the last decode pass, fp32 on the host.
  void decode_logits(long row, float* out /*(Vl)*/);
  void set_parameters(ArenaRange r, const float* values) override;
  void get_parameters(ArenaRange r, float* values) override;
  int num_slots() const override { return acts_.num_slots(); }

 private:
  bool sp() const { return dims().seq_shards > 1; }
  int first_block(int chunk) const { return chunk * blocks_per_chunk_; }
  // Where the fp32 partial sums for a result in `dest` go: dest itself in fp32 runs, else the wide scratch.
  static float* wide_or(T* dest, float* wide) {
    if constexpr (std::is_same_v<T, float>)
      return dest;
    else
      return wide;
  }
  // The partial sums of a row-parallel output whose reduced rows land in `out` (Ns,C): (N,C).
  float* partial_for(T* out) {
    Scratch<T>& sc = acts_.scratch();
    return sp() ? wide_or(sc.rows_full, sc.partial) : wide_or(out, sc.partial);
  }
  // The model's norm (LayerNorm or RMSNorm) of `rows` rows, and its backward (dres +=).
  void norm_rows(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, long rows);
  void norm_rows_backward(T* dres, float* dw, float* db, const T* dout, const T* x, const T* w, const float* mean, const float* rstd,
                          long rows);
  // The norm of Ns rows into the full (N,C) `out` (all-gathered over the sequence when sharded): of x,
  // or with `add` of res = x + add, the residual add before the norm (x may be res), in one pass where
  // the backend fuses them (the same values as residual_forward, then the norm).
  void norm_forward(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, T* res = nullptr, const T* add = nullptr);
  // The gradient of a norm's output (N,C fp32 partial sums over tp; or, dout_partial null, already
  // rounded into sc.dln: without tensor parallelism the GEMMs write it there) into the residual-stream
  // gradient.
  void norm_backward(T* dres, float* dw, float* db, float* dout_partial, const T* x, const T* w, const float* mean,
                     const float* rstd);
  // Without tensor parallelism nothing reduces a row-parallel output or a column-parallel input
  // gradient: the GEMMs write rows of T directly (rounded once, as reduce_rows and norm_backward round
  // the fp32 partial sums) and the partials and their narrowing pass are skipped.
  // A row-parallel output whose rows land in `out` (Ns,C); a column-parallel input gradient (N,C) in sc.dln.
  LinearOutput<T> output_rows(T* out) { return {out, tp_ ? partial_for(out) : nullptr}; }
  LinearOutput<T> ln_grad() {
    Scratch<T>& sc = acts_.scratch();
    return {sc.dln, tp_ ? wide_or(sc.dln, sc.partial) : nullptr};
  }
  // Row-parallel output: (N,C) fp32 partial sums reduced over tp and rounded into `out` (Ns,C); nothing
  // where partial is null (the rows are already in out).
  void reduce_rows(T* out, float* partial);
  // The residual-stream gradient as full rows (N,C): gathered when sharded, else dres itself.
  const T* full_rows_grad();
  // model.qk_layernorm: RMSNorm of each head's queries and keys in a.qkv (before RoPE), keeping their input
  // and 1/rms; and its backward on sc.dqkv (after RoPE's).
  void head_norms_forward(const BlockParams<T>& p, BlockActs<T>& a);
  void head_norms_backward(const BlockParams<T>& p, const BlockParams<float>& g, const BlockActs<T>& a);
  // One block's forward over the pass's rows (pass_), for training, its recomputation and decoding.
  void block_forward(const BlockParams<T>& p, const T* x, BlockActs<T>& a);
  // a.atty from a.qkv: over the micro-batch's own rows, the cp ring, or the key/value cache (decoding).
  // What each row of block `layer` sees: the micro-batch's document starts and the block's sliding window.
  kernels::KeyVisibility visibility(int layer) const { return {batch_->doc_start, plan_.shape.window_at(layer)}; }
  void attention(BlockActs<T>& a, int layer);
  // The embedding (first chunk of the first stage) and the chunk's blocks.
  void blocks_forward(SlotActs<T>& s, int chunk, const MicroBatch& batch);
  void block_backward(const BlockParams<T>& p, const BlockParams<float>& g, const T* x, BlockActs<T>& a);
  // backward(), or B of a split one (wg_ recording).
  void backward_pass(int slot, int chunk, const MicroBatch& batch, float loss_weight, const void* output_grad, void* input_grad);
  // A layer's backward starts (its weight gradients are recorded under it) and ends.
  void backward_begins(int layer) {
    wg_.layer(layer);
    hook(layer, LayerPhase::before_backward);
  }
  void backward_ends(int layer) { hook(layer, wg_.splitting() ? LayerPhase::after_input_grad : LayerPhase::after_backward); }
  T* block_input(SlotActs<T>& s, int i) { return i == 0 ? s.stage_input : s.blocks[static_cast<std::size_t>(i) - 1].res2; }

  const kernels::KernelTable<T>& k_;
  const TensorParallel* tp_;
  int blocks_per_chunk_;
  ModelParams<T> p_;
  ModelParams<float> g_;
  Activations<T> acts_;
  int vocab_start_;
  bool bias_owner_;
  // The rows of the forward pass running: the plan's (B,T), or a decode pass's n rows as one sample.
  ActivationDims pass_;
  KvCache<T>* cache_ = nullptr;  // a decode pass's cache  // adds the bias of row-parallel layers (tp rank 0)
  std::vector<int> replay_from_;  // for the last block of a fully recomputed group: its first block, else -1
  Arena head_grad_;               // plan().separate_tied_head: the tied head's gradient until the step's end
  // Where the norm kernels put the weight gradients of frozen norms (training.freeze), never read: a
  // weight's and a bias's of the widest norm. Empty without frozen tensors.
  Arena frozen_norm_grads_;
  static std::size_t frozen_norm_floats(const RankPlan& plan) {
    return plan.has_frozen() ? 2 * static_cast<std::size_t>(std::max(plan.activations.dims.C, plan.activations.dims.HD())) : 0;
  }
  WeightGrads<T> wg_;             // the backward's weight gradients, joined or split
  LinearGemms<T> linear_;         // the blocks' linear layers' GEMMs (fp8 in fp8 runs)
  DenseMlp<T> dense_;
  LocalExpertDispatch local_dispatch_;
  std::unique_ptr<MoeLayer<T>> moe_;  // MoE blocks
  bool replaying_ = false;            // a full recomputation reruns forwards (not counted in the MoE statistics)
  float loss_weight_ = 0.0f;           // the backward pass's LM loss weight per token
  std::unique_ptr<RingAttention<T>> ring_;  // context parallelism
  // RoPE, the embedding and its backward over the rank's rows, at their positions in their sequences
  // (or the micro-batch's position ids).
  void rope(T* x, const int* positions, bool backward);
  void embed(T* out, const MicroBatch& batch);
  void embed_backward(const T* dout, const MicroBatch& batch);
  const MicroBatch* batch_ = nullptr;  // the micro-batch of the forward or backward running
};

}  // namespace dtrain
