// GptModelImpl<T>: forward/backward for one micro-batch on one rank, in llm.c's order of kernels, for
// storage type T (float or bf16); the factory that picks T from the plan (initial weights:
// initial_weights.cpp).
// One block design covers GPT-2 and the Llama family: LayerNorm or RMSNorm, learned positions or RoPE
// (applied to the packed queries and keys after the QKV product), GELU or SwiGLU MLP, multi-head or
// grouped-query attention, tied or separate LM head, with or without linear biases (plan_.shape).
#include "model/gpt.hpp"

#include <type_traits>
#include <vector>

#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "model/activations.hpp"
#include "model/device_values.hpp"
#include "model/dense_mlp.hpp"
#include "model/kv_decoder_factory.hpp"
#include "model/linear_output.hpp"
#include "model/param_views.hpp"
#include "model/ring_attention.hpp"
#include "model/vocab_parallel_softmax.hpp"
#include "model/weight_grads.hpp"

namespace dtrain {
namespace {

template <typename T>
class GptModelImpl final : public GptModel {
 public:
  GptModelImpl(const RankPlan& plan, const TensorParallel* tp, kernels::Backend backend, Communicator* cp, ExpertDispatch* dispatch)
      : GptModel(plan, device_for(backend)),
        k_(kernels::kernel_table<T>(backend)),
        tp_(tp && tp->size() > 1 ? tp : nullptr),
        blocks_per_chunk_(plan.activations.blocks_per_slot),
        p_(views(plan_, params_.as<T>())),
        g_(views(plan_, grads_.as<float>())),
        acts_(plan.activations, device()),
        vocab_start_(plan.coords.tp * plan.activations.dims.Vl),
        bias_owner_(plan.coords.tp == 0),
        replay_from_(plan.activations.blocks_per_slot, -1),
        head_grad_(device(), plan.separate_tied_head ? sizeof(float) * static_cast<std::size_t>(plan.activations.dims.Vl) *
                                                         static_cast<std::size_t>(plan.activations.dims.C)
                                                   : 0),
        wg_(k_),
        dense_(k_, wg_, plan.activations.dims, plan.shape.swiglu, bias_owner_,
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
  std::unique_ptr<KvDecoder> make_decoder(int batch) override { return make_kv_decoder<T>(plan_, p_, k_, device(), batch); }
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
  void block_forward(const BlockParams<T>& p, const T* x, BlockActs<T>& a);
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
  bool bias_owner_;  // adds the bias of row-parallel layers (tp rank 0)
  std::vector<int> replay_from_;  // for the last block of a fully recomputed group: its first block, else -1
  Arena head_grad_;               // plan().separate_tied_head: the tied head's gradient until the step's end
  WeightGrads<T> wg_;             // the backward's weight gradients, joined or split
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

template <typename T>
void GptModelImpl<T>::rope(T* x, const int* positions, bool backward) {
  const ActivationDims& d = dims();
  const ModelShape& m = plan_.shape;
  if (positions)  // position ids given for every row: one call
    return (backward ? k_.rope_backward : k_.rope_forward)(x, d.B, d.T, d.QKVl(), d.NHl + d.NKVl, d.HD(), m.rotary_dim, m.rope_frequencies,
                                                           0, positions);
  for (const RowChunk& c : d.row_chunks())
    (backward ? k_.rope_backward : k_.rope_forward)(x + c.row * d.QKVl(), c.samples, c.rows, d.QKVl(), d.NHl + d.NKVl, d.HD(),
                                                    m.rotary_dim, m.rope_frequencies, c.position, nullptr);
}

template <typename T>
void GptModelImpl<T>::embed(T* out, const MicroBatch& batch) {
  const ActivationDims& d = dims();
  const T* wpe = bias_owner_ ? p_.wpe : nullptr;
  if (batch.positions)  // position ids given for every row: one call over the whole table
    return k_.embedding_forward(out, batch.tokens, p_.wte, wpe, batch.positions, vocab_start_, d.B, d.T, d.C, d.Vl);
  for (const RowChunk& c : d.row_chunks())
    k_.embedding_forward(out + c.row * d.C, batch.tokens + c.row, p_.wte, wpe ? wpe + static_cast<long>(c.position) * d.C : nullptr,
                         nullptr, vocab_start_, c.samples, c.rows, d.C, d.Vl);
}

template <typename T>
void GptModelImpl<T>::embed_backward(const T* dout, const MicroBatch& batch) {
  const ActivationDims& d = dims();
  if (batch.positions)
    return wg_.embedding(g_.wte, g_.wpe, dout, batch.tokens, batch.positions, vocab_start_, d.B, d.T, d.C, d.Vl, plan_.shape.seq_length);
  for (const RowChunk& c : d.row_chunks())
    wg_.embedding(g_.wte, g_.wpe ? g_.wpe + static_cast<long>(c.position) * d.C : nullptr, dout + c.row * d.C,
                          batch.tokens + c.row, nullptr, vocab_start_, c.samples, c.rows, d.C, d.Vl, c.rows);
}

template <typename T>
void GptModelImpl<T>::norm_rows(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, long rows) {
  const ModelShape& m = plan_.shape;
  if (m.rmsnorm)
    k_.rmsnorm_forward(out, rstd, x, w, rows, dims().C, m.norm_eps);
  else
    k_.layernorm_forward(out, mean, rstd, x, w, b, rows, dims().C, m.norm_eps);
}

template <typename T>
void GptModelImpl<T>::norm_rows_backward(T* dres, float* dw, float* db, const T* dout, const T* x, const T* w, const float* mean,
                                         const float* rstd, long rows) {
  if (plan_.shape.rmsnorm)
    k_.rmsnorm_backward(dres, dw, dout, x, w, rstd, rows, dims().C);
  else
    k_.layernorm_backward(dres, dw, db, dout, x, w, mean, rstd, rows, dims().C);
}

template <typename T>
void GptModelImpl<T>::norm_forward(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, T* res, const T* add) {
  const ActivationDims& d = dims();
  const ModelShape& m = plan_.shape;
  T* dst = sp() ? acts_.scratch().rows_shard : out;  // Ns = N without sequence parallelism
  if (add && m.rmsnorm)
    k_.residual_rmsnorm_forward(res, dst, rstd, x, add, w, d.Ns(), d.C, m.norm_eps);
  else if (add)
    k_.residual_layernorm_forward(res, dst, mean, rstd, x, add, w, b, d.Ns(), d.C, m.norm_eps);
  else
    norm_rows(dst, mean, rstd, x, w, b, d.Ns());
  if (sp()) tp_->all_gather_rows(out, dst, d.Ns(), d.C);
}

template <typename T>
void GptModelImpl<T>::norm_backward(T* dres, float* dw, float* db, float* dout_partial, const T* x, const T* w,
                                    const float* mean, const float* rstd) {
  const ActivationDims& d = dims();
  Scratch<T>& sc = acts_.scratch();
  if (sp()) {
    float* shard = wide_or(sc.rows_shard, sc.partial_shard);
    tp_->reduce_scatter_rows(shard, dout_partial, d.Ns(), d.C);
    k_.narrow(sc.rows_shard, shard, d.Ns() * d.C);
    norm_rows_backward(dres, dw, db, sc.rows_shard, x, w, mean, rstd, d.Ns());
    return;
  }
  if (dout_partial) {
    if (tp_) tp_->all_reduce(dout_partial, d.N() * d.C);
    k_.narrow(sc.dln, dout_partial, d.N() * d.C);
  }
  norm_rows_backward(dres, dw, db, sc.dln, x, w, mean, rstd, d.N());
}

template <typename T>
void GptModelImpl<T>::reduce_rows(T* out, float* partial) {
  if (!partial) return;
  const ActivationDims& d = dims();
  if (sp()) {
    float* shard = wide_or(out, acts_.scratch().partial_shard);
    tp_->reduce_scatter_rows(shard, partial, d.Ns(), d.C);
    k_.narrow(out, shard, d.Ns() * d.C);
    return;
  }
  if (tp_) tp_->all_reduce(partial, d.N() * d.C);
  k_.narrow(out, partial, d.N() * d.C);
}

template <typename T>
const T* GptModelImpl<T>::full_rows_grad() {
  const ActivationDims& d = dims();
  Scratch<T>& sc = acts_.scratch();
  if (!sp()) return sc.dres;
  tp_->all_gather_rows(sc.rows_full, sc.dres, d.Ns(), d.C);
  return sc.rows_full;
}

template <typename T>
void GptModelImpl<T>::block_forward(const BlockParams<T>& p, const T* x, BlockActs<T>& a) {
  const ActivationDims& d = dims();
  const long N = d.N();
  const ModelShape& m = plan_.shape;
  norm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b);
  k_.matmul_forward(a.qkv, a.ln1, p.qkv_w, p.qkv_b, N, d.C, d.QKVl());
  if (m.rope) rope(a.qkv, batch_->positions, false);
  if (ring_)
    ring_->forward(a.atty, a.lse, a.qkv, batch_->doc_start, acts_.scratch());
  else
    k_.attention_forward(a.atty, a.lse, acts_.scratch().dtt, a.qkv, batch_->doc_start, d.B, d.T, d.NHl, d.NKVl, d.HD());
  const LinearOutput<T> proj = output_rows(a.res1);
  linear_forward(k_, proj, a.atty, p.proj_w, bias_owner_ ? p.proj_b : nullptr, N, d.Cl, d.C);
  reduce_rows(a.res1, proj.partial);
  norm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, p.ln2_w, p.ln2_b, a.res1, x);
  // MoE layers always leave fp32 partial sums.
  const LinearOutput<T> mlp = p.moe.router_w ? LinearOutput<T>{nullptr, partial_for(a.res2)} : output_rows(a.res2);
  if (p.moe.router_w)
    moe_->forward(mlp.partial, p.moe, a.ln2, a.moe, acts_.scratch(), p.layer, !replaying_);
  else
    dense_.forward(mlp, p, a);
  reduce_rows(a.res2, mlp.partial);
  k_.residual_forward(a.res2, a.res2, a.res1, d.Ns() * d.C);
}

template <typename T>
void GptModelImpl<T>::forward(int slot, int chunk, const MicroBatch& batch) {
  SlotActs<T>& s = acts_.slot(slot);
  const ActivationDims& d = dims();
  const long N = d.N();
  batch_ = &batch;
  if (chunk == 0 && plan_.part.embedding) {
    hook(kEmbeddingLayer, LayerPhase::before_forward);
    // Vocab-parallel embedding: each row is nonzero on the rank holding its token (plus wpe on tp rank 0),
    // so the sum over the group is exact in either precision.
    T* partial = sp() ? acts_.scratch().rows_full : s.stage_input;
    embed(partial, batch);
    if (sp())
      tp_->reduce_scatter_rows(s.stage_input, partial, d.Ns(), d.C);
    else if (tp_)
      tp_->all_reduce(partial, N * d.C);
    hook(kEmbeddingLayer, LayerPhase::after_forward);
  }
  const int base = first_block(chunk);
  for (int i = 0; i < blocks_per_chunk_; ++i) {
    const int layer = plan_.part.chunks[chunk][i];
    hook(layer, LayerPhase::before_forward);
    block_forward(p_.blocks[base + i], block_input(s, i), s.blocks[i]);
    hook(layer, LayerPhase::after_forward);
  }
  if (!(plan_.part.head && chunk == num_chunks() - 1)) return;

  hook(kHeadLayer, LayerPhase::before_forward);

  norm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, block_input(s, blocks_per_chunk_), p_.lnf_w, p_.lnf_b);
  k_.matmul_forward(s.logits, s.lnf, p_.head, nullptr, N, d.C, d.Vl);
  vocab_parallel_softmax_stats(k_, tp_, s.row_max, s.row_sum, s.target_logit, s.logits, batch.targets, vocab_start_, N, d.Vl);
  hook(kHeadLayer, LayerPhase::after_forward);
  k_.xent_loss(batch.loss_sum, s.lse, s.row_max, s.row_sum, s.target_logit, batch.loss_mask, N);
}

template <typename T>
void GptModelImpl<T>::block_backward(const BlockParams<T>& p, const BlockParams<float>& g, const T* x, BlockActs<T>& a) {
  const ActivationDims& d = dims();
  const long N = d.N();
  Scratch<T>& sc = acts_.scratch();
  const LinearOutput<T> dln = ln_grad();  // (N,C) column-parallel input gradients
  // sc.dres holds the gradient of this block's output; the residual adds pass it through unchanged.
  // Row-parallel biases see the full-row gradient on every rank, so their gradients are complete.
  const ModelShape& m = plan_.shape;
  float* mlp_partial = dln.partial;
  if (p.moe.router_w) {
    mlp_partial = wide_or(sc.dln, sc.partial);  // MoE layers always leave fp32 partial sums
    moe_->backward(mlp_partial, p.moe, g.moe, a.ln2, full_rows_grad(), a.moe, sc, loss_weight_);
  } else {
    dense_.backward(dln, p, g, a, full_rows_grad(), sc);
  }
  norm_backward(sc.dres, g.ln2_w, g.ln2_b, mlp_partial, a.res1, p.ln2_w, a.ln2_mean, a.ln2_rstd);
  wg_.matmul(sc.datty, g.proj_w, g.proj_b, full_rows_grad(), a.atty, p.proj_w, N, d.Cl, d.C);
  // Both keep the attention output and each row's log-sum-exp; the probabilities are recomputed.
  if (ring_)
    ring_->backward(sc.dqkv, sc.datty, a.atty, a.lse, a.qkv, batch_->doc_start, sc);
  else
    k_.attention_backward(sc.dqkv, sc.dtt, sc.datty, a.atty, a.lse, a.qkv, batch_->doc_start, d.B, d.T, d.NHl, d.NKVl, d.HD());
  if (m.rope) rope(sc.dqkv, batch_->positions, true);
  linear_backward(wg_, dln, g.qkv_w, g.qkv_b, sc.dqkv, a.ln1, p.qkv_w, N, d.C, d.QKVl());
  norm_backward(sc.dres, g.ln1_w, g.ln1_b, dln.partial, x, p.ln1_w, a.ln1_mean, a.ln1_rstd);
}

template <typename T>
void GptModelImpl<T>::backward_pass(int slot, int chunk, const MicroBatch& batch, float loss_weight, const void* output_grad,
                                    void* input_grad) {
  SlotActs<T>& s = acts_.slot(slot);
  const ActivationDims& d = dims();
  const long N = d.N(), rows = d.Ns() * d.C;
  Scratch<T>& sc = acts_.scratch();
  loss_weight_ = loss_weight;
  batch_ = &batch;
  if (plan_.part.head && chunk == num_chunks() - 1) {
    backward_begins(kHeadLayer);
    const LinearOutput<T> dlnf = ln_grad();
    k_.loss_weights(sc.dloss, batch.loss_mask, loss_weight, N);
    k_.xent_backward(s.logits, s.logits, s.lse, batch.targets, sc.dloss, vocab_start_, N, d.Vl);
    linear_backward(wg_, dlnf, g_.head, nullptr, s.logits, s.lnf, p_.head, N, d.C, d.Vl);
    k_.zero(sc.dres, rows);
    norm_backward(sc.dres, g_.lnf_w, g_.lnf_b, dlnf.partial, block_input(s, blocks_per_chunk_), p_.lnf_w, s.lnf_mean, s.lnf_rstd);
    backward_ends(kHeadLayer);
  } else {
    k_.copy(sc.dres, static_cast<const T*>(output_grad), rows);
  }
  const int base = first_block(chunk);
  const std::vector<int>& layers = plan_.part.chunks[chunk];
  for (int i = blocks_per_chunk_ - 1; i >= 0; --i) {
    // Full recomputation: at a group's last block, rerun the group's forward from its kept input (the
    // same kernels on the same values: the activations come back bit for bit).
    if (const int from = replay_from_[static_cast<std::size_t>(i)]; from >= 0) {
      replaying_ = true;
      for (int j = from; j <= i; ++j) {
        hook(layers[j], LayerPhase::before_backward);  // the parameters, for the replay
        block_forward(p_.blocks[base + j], block_input(s, j), s.blocks[j]);
      }
      replaying_ = false;
    }
    backward_begins(layers[i]);
    block_backward(p_.blocks[base + i], g_.blocks[base + i], block_input(s, i), s.blocks[i]);
    backward_ends(layers[i]);
  }
  if (chunk == 0 && plan_.part.embedding) {
    wg_.layer(kEmbeddingLayer);
    embed_backward(full_rows_grad(), batch);
    backward_ends(kEmbeddingLayer);
  } else
    k_.copy(static_cast<T*>(input_grad), sc.dres, rows);
}

template <typename T>
void GptModelImpl<T>::logits_row(int slot, long row, float* out) {
  read_values(device(), out, acts_.slot(slot).logits + row * dims().Vl, dims().Vl);
}

template <typename T>
void GptModelImpl<T>::set_parameters(ArenaRange r, const float* values) {
  write_values(device(), params_.as<T>() + r.begin, values, static_cast<long>(r.end - r.begin));
}

template <typename T>
void GptModelImpl<T>::get_parameters(ArenaRange r, float* values) {
  read_values(device(), values, params_.as<T>() + r.begin, static_cast<long>(r.end - r.begin));
}

}  // namespace

GptModel::GptModel(const RankPlan& plan, Device& device)
    : plan_(plan),
      // What ZeRO-2/3 shard is on-demand memory: the owners of the arena's ranges commit them.
      params_(device, plan.arena_size * plan.compute_type_bytes(), plan.shards_params()),
      grads_(device, plan.arena_size * sizeof(float), plan.shards_grads()) {}

std::unique_ptr<GptModel> make_gpt_model(const RankPlan& plan, const TensorParallel* tp, kernels::Backend backend, Communicator* cp,
                                         ExpertDispatch* dispatch) {
  if (plan.precision == Precision::bf16) return std::make_unique<GptModelImpl<bf16>>(plan, tp, backend, cp, dispatch);
  if (plan.precision == Precision::fp16) return std::make_unique<GptModelImpl<fp16>>(plan, tp, backend, cp, dispatch);
  return std::make_unique<GptModelImpl<float>>(plan, tp, backend, cp, dispatch);
}

}  // namespace dtrain
