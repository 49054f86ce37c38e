// GptModel forward/backward for one micro-batch on one rank, in llm.c's order of kernels.
#include "model/gpt.hpp"

#include <algorithm>
#include <cmath>

#include "common/counter_rng.hpp"

namespace dtrain {

GptModel::GptModel(const RankPlan& plan, const TensorParallel* tp, const kernels::KernelTable& k)
    : k_(k),
      tp_(tp && tp->size() > 1 ? tp : nullptr),
      plan_(plan),
      blocks_per_chunk_(plan.activations.blocks_per_slot),
      params_(plan.arena_size),
      grads_(plan.arena_size),
      acts_(plan.activations),
      vocab_start_(plan.coords.tp * plan.activations.dims.Vl),
      bias_owner_(plan.coords.tp == 0) {
  p_ = views(params_);
  g_ = views(grads_);
}

ModelParams GptModel::views(Arena& arena) const {
  ModelParams v;
  const TensorTable& table = plan_.table;
  auto at = [&](const std::string& name) { return arena.data() + table.get(name).offset; };
  if (table.find("wte")) v.wte = at("wte");
  if (table.find("wpe")) v.wpe = at("wpe");
  for (int l : plan_.part.layers()) {
    const std::string h = "h" + std::to_string(l) + ".";
    v.blocks.push_back({at(h + "ln1_w"), at(h + "ln1_b"), at(h + "qkv_w"), at(h + "qkv_b"), at(h + "proj_w"),
                        at(h + "proj_b"), at(h + "ln2_w"), at(h + "ln2_b"), at(h + "fc_w"), at(h + "fc_b"),
                        at(h + "fcproj_w"), at(h + "fcproj_b")});
  }
  if (plan_.part.head) {
    v.lnf_w = at("lnf_w");
    v.lnf_b = at("lnf_b");
  }
  return v;
}

void GptModel::init_parameters(std::uint64_t seed) {
  for (const auto& t : plan_.table.tensors()) {
    float* w = params_.data() + t.offset;
    const std::uint64_t key = rng::key_of(seed, t.name);
    for (long i = 0; i < static_cast<long>(t.numel); ++i) {
      switch (t.init) {
        case InitKind::zeros: w[i] = 0.0f; break;
        case InitKind::ones: w[i] = 1.0f; break;
        case InitKind::normal: w[i] = t.init_std * rng::normal(key, static_cast<std::uint64_t>(global_index(t, i))); break;
      }
    }
  }
}

const float* GptModel::stage_output(int slot, int) { return block_input(acts_.slot(slot), blocks_per_chunk_); }

void GptModel::norm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b) {
  const ActivationDims& d = acts_.dims();
  if (!sp()) {
    k_.layernorm_forward(out, mean, rstd, x, w, b, d.N(), d.C);
    return;
  }
  float* shard = acts_.scratch().rows_shard;
  k_.layernorm_forward(shard, mean, rstd, x, w, b, d.Ns(), d.C);
  tp_->all_gather_rows(out, shard, d.Ns(), d.C);
}

void GptModel::norm_backward(float* dres, float* dw, float* db, float* dout_full, const float* x, const float* w,
                             const float* mean, const float* rstd) {
  const ActivationDims& d = acts_.dims();
  if (sp()) {
    float* shard = acts_.scratch().rows_shard;
    tp_->reduce_scatter_rows(shard, dout_full, d.Ns(), d.C);
    k_.layernorm_backward(dres, dw, db, shard, x, w, mean, rstd, d.Ns(), d.C);
    return;
  }
  if (tp_) tp_->all_reduce(dout_full, d.N() * d.C);
  k_.layernorm_backward(dres, dw, db, dout_full, x, w, mean, rstd, d.N(), d.C);
}

void GptModel::reduce_rows(float* out, float* partial) {
  const ActivationDims& d = acts_.dims();
  if (sp())
    tp_->reduce_scatter_rows(out, partial, d.Ns(), d.C);
  else if (tp_)
    tp_->all_reduce(partial, d.N() * d.C);  // partial is out
}

const float* GptModel::full_rows_grad() {
  const ActivationDims& d = acts_.dims();
  Scratch& sc = acts_.scratch();
  if (!sp()) return sc.dres;
  tp_->all_gather_rows(sc.rows_full, sc.dres, d.Ns(), d.C);
  return sc.rows_full;
}

void GptModel::block_forward(const BlockParams& p, const float* x, BlockActs& a) {
  const ActivationDims& d = acts_.dims();
  const long N = d.N();
  float* partial;
  norm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b);
  k_.matmul_forward(a.qkv, a.ln1, p.qkv_w, p.qkv_b, N, d.C, 3 * d.Cl);
  k_.attention_forward(a.atty, a.att, a.qkv, d.B, d.T, d.NHl, d.Cl / d.NHl);
  partial = sp() ? acts_.scratch().rows_full : a.res1;
  k_.matmul_forward(partial, a.atty, p.proj_w, bias_owner_ ? p.proj_b : nullptr, N, d.Cl, d.C);
  reduce_rows(a.res1, partial);
  k_.residual_forward(a.res1, a.res1, x, d.Ns() * d.C);
  norm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, p.ln2_w, p.ln2_b);
  k_.matmul_forward(a.fch, a.ln2, p.fc_w, p.fc_b, N, d.C, d.Fl);
  k_.gelu_forward(a.fch_gelu, a.fch, N * d.Fl);
  partial = sp() ? acts_.scratch().rows_full : a.res2;
  k_.matmul_forward(partial, a.fch_gelu, p.fcproj_w, bias_owner_ ? p.fcproj_b : nullptr, N, d.Fl, d.C);
  reduce_rows(a.res2, partial);
  k_.residual_forward(a.res2, a.res2, a.res1, d.Ns() * d.C);
}

double GptModel::forward(int slot, int chunk, const MicroBatch& batch) {
  SlotActs& s = acts_.slot(slot);
  const ActivationDims& d = acts_.dims();
  const long N = d.N();
  if (chunk == 0 && plan_.part.embedding) {
    float* partial = sp() ? acts_.scratch().rows_full : s.stage_input;
    k_.embedding_forward(partial, batch.tokens, p_.wte, bias_owner_ ? p_.wpe : nullptr, vocab_start_, d.B, d.T, d.C, d.Vl);
    reduce_rows(s.stage_input, partial);
  }
  const int base = first_block(chunk);
  for (int i = 0; i < blocks_per_chunk_; ++i) {
    if (forward_hook_) forward_hook_(plan_.part.chunks[chunk][i]);
    block_forward(p_.blocks[base + i], block_input(s, i), s.blocks[i]);
  }
  if (!(plan_.part.head && chunk == num_chunks() - 1)) return 0.0;

  norm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, stage_output(slot, chunk), p_.lnf_w, p_.lnf_b);
  k_.matmul_forward(s.logits, s.lnf, p_.wte, nullptr, N, d.C, d.Vl);
  // Vocab-parallel softmax: global max, global sum of exponentials, and the target logit from the rank
  // whose vocabulary slice holds it; no rank ever holds full-vocabulary logits.
  k_.xent_row_max(s.row_max, s.logits, N, d.Vl);
  if (tp_) tp_->all_reduce_max(s.row_max, N);
  k_.xent_row_sum_exp(s.row_sum, s.logits, s.row_max, N, d.Vl);
  k_.xent_target_logit(s.target_logit, s.logits, batch.targets, vocab_start_, N, d.Vl);
  if (tp_) {
    tp_->all_reduce(s.row_sum, N);
    tp_->all_reduce(s.target_logit, N);
  }
  double loss = 0.0;
  for (long i = 0; i < N; ++i) {
    s.lse[i] = s.row_max[i] + std::log(s.row_sum[i]);
    loss += static_cast<double>(s.lse[i]) - s.target_logit[i];
  }
  return loss;
}

void GptModel::block_backward(const BlockParams& p, const BlockParams& g, const float* x, BlockActs& a) {
  const ActivationDims& d = acts_.dims();
  const long N = d.N();
  Scratch& sc = acts_.scratch();
  // sc.dres holds the gradient of this block's output; the residual adds pass it through unchanged.
  // Row-parallel biases see the full-row gradient on every rank, so their gradients are complete.
  k_.matmul_backward(sc.dfch2, g.fcproj_w, g.fcproj_b, full_rows_grad(), a.fch_gelu, p.fcproj_w, N, d.Fl, d.C);
  k_.gelu_backward(sc.dfch, a.fch, sc.dfch2, N * d.Fl);
  k_.matmul_backward(sc.dln, g.fc_w, g.fc_b, sc.dfch, a.ln2, p.fc_w, N, d.C, d.Fl);
  norm_backward(sc.dres, g.ln2_w, g.ln2_b, sc.dln, a.res1, p.ln2_w, a.ln2_mean, a.ln2_rstd);
  k_.matmul_backward(sc.datty, g.proj_w, g.proj_b, full_rows_grad(), a.atty, p.proj_w, N, d.Cl, d.C);
  k_.attention_backward(sc.dqkv, sc.dtt, sc.datty, a.qkv, a.att, d.B, d.T, d.NHl, d.Cl / d.NHl);
  k_.matmul_backward(sc.dln, g.qkv_w, g.qkv_b, sc.dqkv, a.ln1, p.qkv_w, N, d.C, 3 * d.Cl);
  norm_backward(sc.dres, g.ln1_w, g.ln1_b, sc.dln, x, p.ln1_w, a.ln1_mean, a.ln1_rstd);
}

void GptModel::backward(int slot, int chunk, const MicroBatch& batch, float loss_scale, const float* output_grad,
                        float* input_grad) {
  SlotActs& s = acts_.slot(slot);
  const ActivationDims& d = acts_.dims();
  const long N = d.N(), rows = d.Ns() * d.C;
  Scratch& sc = acts_.scratch();
  if (plan_.part.head && chunk == num_chunks() - 1) {
    for (long i = 0; i < N; ++i) sc.dloss[i] = loss_scale;
    k_.xent_backward(s.logits, s.logits, s.lse, batch.targets, sc.dloss, vocab_start_, N, d.Vl);
    k_.matmul_backward(sc.dln, g_.wte, nullptr, s.logits, s.lnf, p_.wte, N, d.C, d.Vl);
    std::fill(sc.dres, sc.dres + rows, 0.0f);
    norm_backward(sc.dres, g_.lnf_w, g_.lnf_b, sc.dln, stage_output(slot, chunk), p_.lnf_w, s.lnf_mean, s.lnf_rstd);
  } else {
    std::copy(output_grad, output_grad + rows, sc.dres);
  }
  const int base = first_block(chunk);
  for (int i = blocks_per_chunk_ - 1; i >= 0; --i) {
    block_backward(p_.blocks[base + i], g_.blocks[base + i], block_input(s, i), s.blocks[i]);
    if (backward_hook_) backward_hook_(plan_.part.chunks[chunk][i]);
  }
  if (chunk == 0 && plan_.part.embedding)
    k_.embedding_backward(g_.wte, g_.wpe, full_rows_grad(), batch.tokens, vocab_start_, d.B, d.T, d.C, d.Vl);
  else
    std::copy(sc.dres, sc.dres + rows, input_grad);
}

}  // namespace dtrain
