// GptModelImpl<T>'s backward pass (model/gpt_model_impl.hpp): the head, the blocks in reverse (full
// recomputation replays a group's forward first), the embedding; whole, or its input half when the
// model's WeightGrads records the weight half (zero-bubble schedules). Its functions are instantiated
// here for float, bf16 and fp16 (gpt.cpp instantiates the class with the rest).
#include <vector>

#include "model/gpt_model_impl.hpp"

namespace dtrain {

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
void GptModelImpl<T>::norm_rows_backward(T* dres, float* dw, float* db, const T* dout, const T* x, const T* w, const float* mean,
                                         const float* rstd, long rows) {
  if (!dw) dw = frozen_norm_grads_.as<float>();  // frozen: computed and dropped
  if (!db && !plan_.shape.rmsnorm) db = frozen_norm_grads_.as<float>() + dims().C;
  if (plan_.shape.rmsnorm)
    k_.rmsnorm_backward(dres, dw, dout, x, w, rstd, rows, dims().C);
  else
    k_.layernorm_backward(dres, dw, db, dout, x, w, mean, rstd, rows, dims().C);
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
const T* GptModelImpl<T>::full_rows_grad() {
  const ActivationDims& d = dims();
  Scratch<T>& sc = acts_.scratch();
  if (!sp()) return sc.dres;
  tp_->all_gather_rows(sc.rows_full, sc.dres, d.Ns(), d.C);
  return sc.rows_full;
}


// The heads' norms backward, in place on the query and key columns of sc.dqkv (their output gradient,
// turned back through RoPE): each norm's input gradient, and its weight's (partial over tp: this rank's
// heads; GradSync sums it).
template <typename T>
void GptModelImpl<T>::head_norms_backward(const BlockParams<T>& p, const BlockParams<float>& g, const BlockActs<T>& a) {
  const ActivationDims& d = dims();
  const long N = d.N();
  const int W = d.QKVl(), HD = d.HD(), Q = d.NHl * HD, K = d.NKVl * HD;
  Scratch<T>& sc = acts_.scratch();
  const auto one = [&](int col, int width, int heads, float* dw, const T* raw, const T* w, const float* rstd) {
    k_.copy_columns(sc.qk_dy, sc.dqkv, N, W, col, width);
    k_.zero(sc.qk_out, N * width);  // rmsnorm_backward adds
    k_.rmsnorm_backward(sc.qk_out, dw ? dw : frozen_norm_grads_.as<float>(), sc.qk_dy, raw, w, rstd, N * heads, HD);
    k_.insert_columns(sc.dqkv, sc.qk_out, N, W, col, width);
  };
  one(0, Q, d.NHl, g.qnorm_w, a.q_raw, p.qnorm_w, a.q_rstd);
  one(Q, K, d.NKVl, g.knorm_w, a.k_raw, p.knorm_w, a.k_rstd);
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
  linear_.backward({sc.datty, nullptr}, g.proj_w, g.proj_b, full_rows_grad(), a.atty, p.proj_w, N, d.Cl, d.C);
  // Both keep the attention output and each row's log-sum-exp; the probabilities are recomputed.
  if (ring_)
    ring_->backward(sc.dqkv, sc.datty, a.atty, a.lse, a.qkv, visibility(p.layer), sc);
  else
    k_.attention_backward(sc.dqkv, sc.dtt, sc.datty, a.atty, a.lse, a.qkv, visibility(p.layer), d.B, d.T, d.NHl, d.NKVl, d.HD());
  if (m.rope) rope(sc.dqkv, batch_->positions, true);
  if (m.qk_norm) head_norms_backward(p, g, a);
  linear_.backward(dln, g.qkv_w, g.qkv_b, sc.dqkv, a.ln1, p.qkv_w, N, d.C, d.QKVl());
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


#define DTRAIN_GPT_BACKWARD(T)                                                                                                     \
  template void GptModelImpl<T>::embed_backward(const T*, const MicroBatch&);                                                      \
  template void GptModelImpl<T>::norm_rows_backward(T*, float*, float*, const T*, const T*, const T*, const float*, const float*,  \
                                                    long);                                                                         \
  template void GptModelImpl<T>::norm_backward(T*, float*, float*, float*, const T*, const T*, const float*, const float*);        \
  template const T* GptModelImpl<T>::full_rows_grad();                                                                             \
  template void GptModelImpl<T>::block_backward(const BlockParams<T>&, const BlockParams<float>&, const T*, BlockActs<T>&);        \
  template void GptModelImpl<T>::head_norms_backward(const BlockParams<T>&, const BlockParams<float>&, const BlockActs<T>&);     \
  template void GptModelImpl<T>::backward_pass(int, int, const MicroBatch&, float, const void*, void*);
DTRAIN_GPT_BACKWARD(float)
DTRAIN_GPT_BACKWARD(bf16)
DTRAIN_GPT_BACKWARD(fp16)
#undef DTRAIN_GPT_BACKWARD

}  // namespace dtrain
