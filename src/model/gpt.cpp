// GptModelImpl<T> (model/gpt_model_impl.hpp): its forward pass, parameters and logits, the class's
// instantiations for float, bf16 and fp16, and the factory that picks T from the plan (the backward pass:
// gpt_backward.cpp; initial weights: initial_weights.cpp).
#include "model/gpt.hpp"

#include "common/error.hpp"
#include "model/device_values.hpp"
#include "model/gpt_model_impl.hpp"
#include "model/vocab_parallel_softmax.hpp"

namespace dtrain {

template <typename T>
void GptModelImpl<T>::rope(T* x, const int* positions, bool backward) {
  const ActivationDims& d = pass_;
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
  const ActivationDims& d = pass_;
  const T* wpe = bias_owner_ ? p_.wpe : nullptr;
  if (batch.positions)  // position ids given for every row: one call over the whole table
    return k_.embedding_forward(out, batch.tokens, p_.wte, wpe, batch.positions, vocab_start_, d.B, d.T, d.C, d.Vl);
  for (const RowChunk& c : d.row_chunks())
    k_.embedding_forward(out + c.row * d.C, batch.tokens + c.row, p_.wte, wpe ? wpe + static_cast<long>(c.position) * d.C : nullptr,
                         nullptr, vocab_start_, c.samples, c.rows, d.C, d.Vl);
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
void GptModelImpl<T>::norm_forward(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, T* res, const T* add) {
  const ActivationDims& d = pass_;
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
void GptModelImpl<T>::reduce_rows(T* out, float* partial) {
  if (!partial) return;
  const ActivationDims& d = pass_;
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
void GptModelImpl<T>::attention(BlockActs<T>& a, int layer) {
  const ActivationDims& d = pass_;
  Scratch<T>& sc = acts_.scratch();
  if (cache_)
    cache_->attend(k_, a.atty, a.lse, sc.dtt, a.qkv, layer);
  else if (ring_)
    ring_->forward(a.atty, a.lse, a.qkv, visibility(layer), sc);
  else
    k_.attention_forward(a.atty, a.lse, sc.dtt, a.qkv, visibility(layer), d.B, d.T, d.NHl, d.NKVl, d.HD());
}


template <typename T>
void GptModelImpl<T>::head_norms_forward(const BlockParams<T>& p, BlockActs<T>& a) {
  const ActivationDims& d = pass_;
  const long N = d.N();
  const int W = d.QKVl(), HD = d.HD(), Q = d.NHl * HD, K = d.NKVl * HD;
  const float eps = plan_.shape.norm_eps;
  T* out = acts_.scratch().qk_out;
  // Each head's HD values are a row of the norm: (N, NHl*HD) queries as N*NHl rows of HD.
  k_.copy_columns(a.q_raw, a.qkv, N, W, 0, Q);
  k_.rmsnorm_forward(out, a.q_rstd, a.q_raw, p.qnorm_w, N * d.NHl, HD, eps);
  k_.insert_columns(a.qkv, out, N, W, 0, Q);
  k_.copy_columns(a.k_raw, a.qkv, N, W, Q, K);
  k_.rmsnorm_forward(out, a.k_rstd, a.k_raw, p.knorm_w, N * d.NKVl, HD, eps);
  k_.insert_columns(a.qkv, out, N, W, Q, K);
}


template <typename T>
void GptModelImpl<T>::block_forward(const BlockParams<T>& p, const T* x, BlockActs<T>& a) {
  const ActivationDims& d = pass_;
  const long N = d.N();
  const ModelShape& m = plan_.shape;
  norm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b);
  linear_.forward({a.qkv, nullptr}, a.ln1, p.qkv_w, p.qkv_b, N, d.C, d.QKVl());
  if (m.qk_norm) head_norms_forward(p, a);
  if (m.rope) rope(a.qkv, batch_->positions, false);
  attention(a, p.layer);
  const LinearOutput<T> proj = output_rows(a.res1);
  linear_.forward(proj, a.atty, p.proj_w, bias_owner_ ? p.proj_b : nullptr, N, d.Cl, d.C);
  reduce_rows(a.res1, proj.partial);
  norm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, p.ln2_w, p.ln2_b, a.res1, x);
  // MoE layers always leave fp32 partial sums.
  const LinearOutput<T> mlp = p.moe.router_w ? LinearOutput<T>{nullptr, partial_for(a.res2)} : output_rows(a.res2);
  if (p.moe.router_w)
    moe_->forward(mlp.partial, p.moe, a.ln2, N, a.moe, acts_.scratch(), p.layer, !replaying_ && !cache_);
  else
    dense_.forward(mlp, p, a, N);
  reduce_rows(a.res2, mlp.partial);
  k_.residual_forward(a.res2, a.res2, a.res1, d.Ns() * d.C);
}


template <typename T>
void GptModelImpl<T>::blocks_forward(SlotActs<T>& s, int chunk, const MicroBatch& batch) {
  const ActivationDims& d = pass_;
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
}


template <typename T>
void GptModelImpl<T>::forward(int slot, int chunk, const MicroBatch& batch) {
  SlotActs<T>& s = acts_.slot(slot);
  const ActivationDims& d = dims();
  const long N = d.N();
  blocks_forward(s, chunk, batch);
  if (!(plan_.part.head && chunk == num_chunks() - 1)) return;

  hook(kHeadLayer, LayerPhase::before_forward);

  norm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, block_input(s, blocks_per_chunk_), p_.lnf_w, p_.lnf_b);
  k_.matmul_forward(s.logits, s.lnf, p_.head, nullptr, N, d.C, d.Vl);
  vocab_parallel_softmax_stats(k_, tp_, s.row_max, s.row_sum, s.target_logit, s.logits, batch.targets, vocab_start_, N, d.Vl);
  hook(kHeadLayer, LayerPhase::after_forward);
  k_.xent_loss(batch.loss_sum, s.lse, s.row_max, s.row_sum, s.target_logit, batch.loss_mask, N);
}


template <typename T>
void GptModelImpl<T>::decode(const MicroBatch& rows, long n, KvCache<T>& cache) {
  if (n < 1 || n > dims().N()) fatal("internal error: a decode pass of " + std::to_string(n) + " rows");
  SlotActs<T>& s = acts_.slot(0);
  pass_.B = 1, pass_.T = static_cast<int>(n);
  cache_ = &cache;
  blocks_forward(s, 0, rows);
  hook(kHeadLayer, LayerPhase::before_forward);
  norm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, block_input(s, blocks_per_chunk_), p_.lnf_w, p_.lnf_b);
  hook(kHeadLayer, LayerPhase::after_forward);
  cache_ = nullptr;
  pass_ = dims();
}


template <typename T>
void GptModelImpl<T>::decode_logits(long row, float* out) {
  SlotActs<T>& s = acts_.slot(0);
  const ActivationDims& d = dims();
  hook(kHeadLayer, LayerPhase::before_forward);
  k_.matmul_forward(s.logits + row * d.Vl, s.lnf + row * d.C, p_.head, nullptr, 1, d.C, d.Vl);
  hook(kHeadLayer, LayerPhase::after_forward);
  logits_row(0, row, out);
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

template class GptModelImpl<float>;
template class GptModelImpl<bf16>;
template class GptModelImpl<fp16>;

GptModel::GptModel(const RankPlan& plan, Device& device)
    : plan_(plan),
      // What ZeRO-2/3 shard is on-demand memory: the owners of the arena's ranges commit them.
      params_(device, plan.arena_size * plan.compute_type_bytes(), plan.shards_params()),
      grads_(device, plan.grad_arena_size * sizeof(float), plan.shards_grads()) {}

std::unique_ptr<GptModel> make_gpt_model(const RankPlan& plan, const TensorParallel* tp, kernels::Backend backend, Communicator* cp,
                                         ExpertDispatch* dispatch) {
  if (storage_precision(plan.precision) == Precision::bf16) return std::make_unique<GptModelImpl<bf16>>(plan, tp, backend, cp, dispatch);
  if (plan.precision == Precision::fp16) return std::make_unique<GptModelImpl<fp16>>(plan, tp, backend, cp, dispatch);
  return std::make_unique<GptModelImpl<float>>(plan, tp, backend, cp, dispatch);
}

}  // namespace dtrain
