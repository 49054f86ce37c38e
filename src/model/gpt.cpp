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

double model_flops_per_token(const Config& c) {
  const double L = c.model.num_layers, C = c.model.hidden_size, F = c.ffn_hidden(), T = c.model.seq_length,
               V = c.model.vocab_size;
  const double matmul_params = L * (3 * C * C + C * C + 2 * C * F) + V * C;
  return 6.0 * matmul_params + 12.0 * L * T * C;
}

GptModel::GptModel(const Config& cfg, const StagePart& part, int tp_size, int tp_rank, const kernels::KernelTable& k,
                   int activation_slots)
    : k_(k),
      part_(part),
      table_(ModelShape::from(cfg.model, cfg.ffn_hidden()), part, tp_size, tp_rank),
      params_(table_.total()),
      grads_(table_.total()),
      acts_(ActivationDims{cfg.model.micro_batch, cfg.model.seq_length, cfg.model.hidden_size,
                           cfg.model.hidden_size / tp_size, cfg.model.num_attention_heads / tp_size,
                           cfg.ffn_hidden() / tp_size, cfg.model.vocab_size / tp_size},
            static_cast<int>(part.layers.size()), part.head, activation_slots),
      vocab_start_(tp_rank * (cfg.model.vocab_size / tp_size)) {
  p_ = views(params_);
  g_ = views(grads_);
}

ModelParams GptModel::views(Arena& arena) const {
  ModelParams v;
  auto at = [&](const std::string& name) { return arena.data() + table_.get(name).offset; };
  if (table_.find("wte")) v.wte = at("wte");
  if (table_.find("wpe")) v.wpe = at("wpe");
  for (int l : part_.layers) {
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

void GptModel::block_forward(const BlockParams& p, const float* x, BlockActs& a) {
  const ActivationDims& d = acts_.dims();
  const long N = d.N();
  k_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b, N, d.C);
  k_.matmul_forward(a.qkv, a.ln1, p.qkv_w, p.qkv_b, N, d.C, 3 * d.Cl);
  k_.attention_forward(a.atty, a.att, a.qkv, d.B, d.T, d.NHl, d.Cl / d.NHl);
  k_.matmul_forward(a.res1, a.atty, p.proj_w, p.proj_b, N, d.Cl, d.C);
  k_.residual_forward(a.res1, a.res1, x, N * d.C);
  k_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, p.ln2_w, p.ln2_b, N, d.C);
  k_.matmul_forward(a.fch, a.ln2, p.fc_w, p.fc_b, N, d.C, d.Fl);
  k_.gelu_forward(a.fch_gelu, a.fch, N * d.Fl);
  k_.matmul_forward(a.res2, a.fch_gelu, p.fcproj_w, p.fcproj_b, N, d.Fl, d.C);
  k_.residual_forward(a.res2, a.res2, a.res1, N * d.C);
}

double GptModel::forward(int slot) {
  SlotActs& s = acts_.slot(slot);
  const ActivationDims& d = acts_.dims();
  const long N = d.N();
  if (part_.embedding) k_.embedding_forward(s.stage_input, s.tokens, p_.wte, p_.wpe, vocab_start_, d.B, d.T, d.C, d.Vl);
  for (std::size_t i = 0; i < p_.blocks.size(); ++i) block_forward(p_.blocks[i], block_input(s, static_cast<int>(i)), s.blocks[i]);
  if (!part_.head) return 0.0;

  const float* x = block_input(s, static_cast<int>(p_.blocks.size()));
  k_.layernorm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, x, p_.lnf_w, p_.lnf_b, N, d.C);
  k_.matmul_forward(s.logits, s.lnf, p_.wte, nullptr, N, d.C, d.Vl);
  k_.xent_row_max(s.row_max, s.logits, N, d.Vl);
  k_.xent_row_sum_exp(s.row_sum, s.logits, s.row_max, N, d.Vl);
  k_.xent_target_logit(s.target_logit, s.logits, s.targets, vocab_start_, N, d.Vl);
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
  BackwardScratch& sc = acts_.scratch();
  // sc.dres holds the gradient of this block's output; the residual adds pass it through unchanged.
  k_.matmul_backward(sc.dfch2, g.fcproj_w, g.fcproj_b, sc.dres, a.fch_gelu, p.fcproj_w, N, d.Fl, d.C);
  k_.gelu_backward(sc.dfch, a.fch, sc.dfch2, N * d.Fl);
  k_.matmul_backward(sc.dln, g.fc_w, g.fc_b, sc.dfch, a.ln2, p.fc_w, N, d.C, d.Fl);
  k_.layernorm_backward(sc.dres, g.ln2_w, g.ln2_b, sc.dln, a.res1, p.ln2_w, a.ln2_mean, a.ln2_rstd, N, d.C);
  k_.matmul_backward(sc.datty, g.proj_w, g.proj_b, sc.dres, a.atty, p.proj_w, N, d.Cl, d.C);
  k_.attention_backward(sc.dqkv, sc.dtt, sc.datty, a.qkv, a.att, d.B, d.T, d.NHl, d.Cl / d.NHl);
  k_.matmul_backward(sc.dln, g.qkv_w, g.qkv_b, sc.dqkv, a.ln1, p.qkv_w, N, d.C, 3 * d.Cl);
  k_.layernorm_backward(sc.dres, g.ln1_w, g.ln1_b, sc.dln, x, p.ln1_w, a.ln1_mean, a.ln1_rstd, N, d.C);
}

void GptModel::backward(int slot, float loss_scale) {
  SlotActs& s = acts_.slot(slot);
  const ActivationDims& d = acts_.dims();
  const long N = d.N();
  BackwardScratch& sc = acts_.scratch();
  if (part_.head) {
    for (long i = 0; i < N; ++i) sc.dloss[i] = loss_scale;
    k_.xent_backward(s.logits, s.logits, s.lse, s.targets, sc.dloss, vocab_start_, N, d.Vl);
    k_.matmul_backward(sc.dln, g_.wte, nullptr, s.logits, s.lnf, p_.wte, N, d.C, d.Vl);
    std::fill(sc.dres, sc.dres + N * d.C, 0.0f);
    const float* x = block_input(s, static_cast<int>(p_.blocks.size()));
    k_.layernorm_backward(sc.dres, g_.lnf_w, g_.lnf_b, sc.dln, x, p_.lnf_w, s.lnf_mean, s.lnf_rstd, N, d.C);
  }
  for (int i = static_cast<int>(p_.blocks.size()) - 1; i >= 0; --i)
    block_backward(p_.blocks[i], g_.blocks[i], block_input(s, i), s.blocks[i]);
  if (part_.embedding) k_.embedding_backward(g_.wte, g_.wpe, sc.dres, s.tokens, vocab_start_, d.B, d.T, d.C, d.Vl);
}

}  // namespace dtrain
