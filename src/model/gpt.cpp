// GptModel forward/backward for one micro-batch on one rank, in llm.c's order of kernels.
#include "model/gpt.hpp"

#include <algorithm>
#include <cmath>

#include "common/counter_rng.hpp"

namespace dtrain {

long global_index(const TensorSpec& t, long i) {
  const int dims = static_cast<int>(t.local_shape.size());
  long g = 0, stride = 1;
  for (int d = dims - 1; d >= 0; --d) {
    const long coord = i % t.local_shape[d] + t.local_offset[d];
    i /= t.local_shape[d];
    g += coord * stride;
    stride *= t.global_shape[d];
  }
  return g;
}

std::size_t padded_arena_size(const TensorTable& table, int multiple) {
  const std::size_t unit = 16 * static_cast<std::size_t>(std::max(1, multiple));
  return (table.total() + unit - 1) / unit * unit;
}

double model_flops_per_token(const Config& c) {
  const double L = c.model.num_layers, C = c.model.hidden_size, F = c.ffn_hidden(), T = c.model.seq_length,
               V = c.model.vocab_size;
  const double matmul_params = L * (3 * C * C + C * C + 2 * C * F) + V * C;
  return 6.0 * matmul_params + 12.0 * L * T * C;
}

GptModel::GptModel(const Config& cfg, const StagePart& part, const TensorParallel* tp, int tp_rank,
                   const kernels::KernelTable& k, int activation_slots, int arena_multiple)
    : k_(k),
      tp_(tp && tp->size() > 1 ? tp : nullptr),
      part_(part),
      blocks_per_chunk_(static_cast<int>(part.chunks.front().size())),
      table_(ModelShape::from(cfg.model, cfg.ffn_hidden()), part, tp_ ? tp_->size() : 1, tp_rank),
      params_(padded_arena_size(table_, arena_multiple)),
      grads_(params_.size()),
      acts_(ActivationDims{cfg.model.micro_batch, cfg.model.seq_length, cfg.model.hidden_size,
                           cfg.model.hidden_size / (tp_ ? tp_->size() : 1),
                           cfg.model.num_attention_heads / (tp_ ? tp_->size() : 1),
                           cfg.ffn_hidden() / (tp_ ? tp_->size() : 1), cfg.model.vocab_size / (tp_ ? tp_->size() : 1),
                           tp_ && cfg.system.sequence_parallel ? tp_->size() : 1},
            blocks_per_chunk_, part.head, activation_slots),
      vocab_start_(tp_rank * (cfg.model.vocab_size / (tp_ ? tp_->size() : 1))),
      bias_owner_(tp_rank == 0) {
  p_ = views(params_);
  g_ = views(grads_);
}

ModelParams GptModel::views(Arena& arena) const {
  ModelParams v;
  auto at = [&](const std::string& name) { return arena.data() + table_.get(name).offset; };
  if (table_.find("wte")) v.wte = at("wte");
  if (table_.find("wpe")) v.wpe = at("wpe");
  for (int l : part_.layers()) {
    const std::string h = "h" + std::to_string(l) + ".";
    v.blocks.push_back({at(h + "ln1_w"), at(h + "ln1_b"), at(h + "qkv_w"), at(h + "qkv_b"), at(h + "proj_w"),
                        at(h + "proj_b"), at(h + "ln2_w"), at(h + "ln2_b"), at(h + "fc_w"), at(h + "fc_b"),
                        at(h + "fcproj_w"), at(h + "fcproj_b")});
  }
  if (part_.head) {
    v.lnf_w = at("lnf_w");
    v.lnf_b = at("lnf_b");
  }
  return v;
}

std::vector<const TensorSpec*> GptModel::sequence_parallel_tensors() const {
  std::vector<const TensorSpec*> out;
  if (!sp()) return out;
  for (const auto& t : table_.tensors()) {
    const auto dot = t.name.rfind('.');
    const std::string base = dot == std::string::npos ? t.name : t.name.substr(dot + 1);
    if (base.rfind("ln", 0) == 0) out.push_back(&t);
  }
  return out;
}

void GptModel::init_parameters(std::uint64_t seed) {
  for (const auto& t : table_.tensors()) {
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

float* GptModel::block_input(SlotActs& s, int, int i) { return i == 0 ? s.stage_input : s.blocks[i - 1].res2; }

float* GptModel::stage_output(int slot, int chunk) {
  return block_input(acts_.slot(slot), chunk, blocks_per_chunk_);
}

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

double GptModel::forward(int slot, int chunk) {
  SlotActs& s = acts_.slot(slot);
  const ActivationDims& d = acts_.dims();
  const long N = d.N();
  if (chunk == 0 && part_.embedding) {
    float* partial = sp() ? acts_.scratch().rows_full : s.stage_input;
    k_.embedding_forward(partial, s.tokens, p_.wte, bias_owner_ ? p_.wpe : nullptr, vocab_start_, d.B, d.T, d.C, d.Vl);
    reduce_rows(s.stage_input, partial);
  }
  const int base = first_block(chunk);
  for (int i = 0; i < blocks_per_chunk_; ++i) {
    if (forward_hook_) forward_hook_(part_.chunks[chunk][i]);
    block_forward(p_.blocks[base + i], block_input(s, chunk, i), s.blocks[i]);
  }
  if (!(part_.head && chunk == num_chunks() - 1)) return 0.0;

  norm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, stage_output(slot, chunk), p_.lnf_w, p_.lnf_b);
  k_.matmul_forward(s.logits, s.lnf, p_.wte, nullptr, N, d.C, d.Vl);
  // Vocab-parallel softmax: global max, global sum of exponentials, and the target logit from the rank
  // whose vocabulary slice holds it; no rank ever holds full-vocabulary logits.
  k_.xent_row_max(s.row_max, s.logits, N, d.Vl);
  if (tp_) tp_->all_reduce_max(s.row_max, N);
  k_.xent_row_sum_exp(s.row_sum, s.logits, s.row_max, N, d.Vl);
  k_.xent_target_logit(s.target_logit, s.logits, s.targets, vocab_start_, N, d.Vl);
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

void GptModel::backward(int slot, int chunk, float loss_scale, const float* output_grad) {
  SlotActs& s = acts_.slot(slot);
  const ActivationDims& d = acts_.dims();
  const long N = d.N(), rows = d.Ns() * d.C;
  Scratch& sc = acts_.scratch();
  if (part_.head && chunk == num_chunks() - 1) {
    for (long i = 0; i < N; ++i) sc.dloss[i] = loss_scale;
    k_.xent_backward(s.logits, s.logits, s.lse, s.targets, sc.dloss, vocab_start_, N, d.Vl);
    k_.matmul_backward(sc.dln, g_.wte, nullptr, s.logits, s.lnf, p_.wte, N, d.C, d.Vl);
    std::fill(sc.dres, sc.dres + rows, 0.0f);
    norm_backward(sc.dres, g_.lnf_w, g_.lnf_b, sc.dln, stage_output(slot, chunk), p_.lnf_w, s.lnf_mean, s.lnf_rstd);
  } else {
    std::copy(output_grad, output_grad + rows, sc.dres);
  }
  const int base = first_block(chunk);
  for (int i = blocks_per_chunk_ - 1; i >= 0; --i) {
    block_backward(p_.blocks[base + i], g_.blocks[base + i], block_input(s, chunk, i), s.blocks[i]);
    if (backward_hook_) backward_hook_(part_.chunks[chunk][i]);
  }
  if (chunk == 0 && part_.embedding)
    k_.embedding_backward(g_.wte, g_.wpe, full_rows_grad(), s.tokens, vocab_start_, d.B, d.T, d.C, d.Vl);
  else
    std::copy(sc.dres, sc.dres + rows, s.grad_out);
}

}  // namespace dtrain
