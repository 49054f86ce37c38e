// The whole model's backward pass against central finite differences of its forward loss, on a tiny
// config, for a sample of elements of every parameter tensor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>

#include "config/load.hpp"
#include "model/gpt.hpp"

using namespace dtrain;

namespace {

Config tiny_config(const std::vector<std::string>& overrides = {}) {
  return load_config("[model]\nnum_layers=2\nhidden_size=16\nnum_attention_heads=2\nseq_length=8\nvocab_size=32\n"
                     "global_batch_size=2\nmicro_batch_size=2\n", "tiny", overrides);
}

// A Llama-family block: RMSNorm, RoPE over 6 of 8 head dims, SwiGLU, 4 query heads on 2 key/value
// heads, untied LM head, no linear biases.
const std::vector<std::string> kLlama = {
    "--model.hidden_size=32", "--model.num_attention_heads=4", "--model.normalization=RMSNorm", "--model.position_embedding_type=rope",
    "--model.rotary_percent=0.75", "--model.swiglu=true", "--model.ffn_hidden_size=24", "--model.group_query_attention=true",
    "--model.num_query_groups=2", "--model.untie_embeddings_and_output_weights=true", "--model.add_bias_linear=false"};

// Mixture of experts in block 0 (block 1 dense): 3 experts of width 12, each token routed to all 3, so
// that the loss is a smooth function of the router (top-k of fewer experts jumps where the choice
// changes; the PyTorch reference covers top-k and dropping).
const std::vector<std::string> kMoe = {"--model.num_experts=3", "--model.moe_router_topk=3", "--model.moe_ffn_hidden_size=12",
                                       "--model.moe_layer_freq=2"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void check_model_gradient(const Config& cfg);

// The summed token loss of a forward pass (the host backend: device memory is host memory).
double summed_loss(GptModel& model, MicroBatch batch) {
  double loss = 0.0;
  batch.loss_sum = &loss;
  model.forward(0, 0, batch);
  return loss;
}

}  // namespace

TEST_CASE("model gradient matches finite differences of the loss", "[model]") { check_model_gradient(tiny_config()); }

TEST_CASE("Llama-family model gradient matches finite differences of the loss", "[model][llama]") {
  const Config cfg = tiny_config(kLlama);
  const RankPlan plan = whole_model_plan(cfg, 2);
  // The Llama tensors, and none of GPT's extras.
  for (const char* name : {"lm_head", "h0.q_w", "h0.kv_w", "h1.fc_w"}) CHECK(plan.table.find(name));
  for (const char* name : {"wpe", "lnf_b", "h0.ln1_b", "h0.qkv_w", "h0.proj_b", "h0.fc_b"}) CHECK_FALSE(plan.table.find(name));
  CHECK(plan.table.get("h0.kv_w").global_shape == std::vector<long>{2, 16, 32});
  CHECK(plan.table.get("h1.fc_w").global_shape == std::vector<long>{2, 24, 32});
  CHECK(plan.shape.rotary_dim == 6);
  check_model_gradient(cfg);
}

TEST_CASE("Qwen2's query/key/value biases, kv_channels, qk_layernorm and a sliding window: gradients match finite differences",
          "[model][llama]") {
  // add_qkv_bias: q_b and kv_b without add_bias_linear's other biases.
  const Config qwen2 = tiny_config(with(kLlama, {"--model.add_qkv_bias=true"}));
  const RankPlan plan = whole_model_plan(qwen2, 2);
  for (const char* name : {"h0.q_b", "h0.kv_b", "h1.q_b"}) CHECK(plan.table.find(name));
  for (const char* name : {"h0.proj_b", "h0.fc_b", "h0.fcproj_b"}) CHECK_FALSE(plan.table.find(name));
  CHECK(plan.table.get("h0.kv_b").global_shape == std::vector<long>{2, 16});
  check_model_gradient(qwen2);
  // model.kv_channels: heads of 16 dims whatever the hidden size (4 x 16 = 64 attention columns at hidden 32),
  // with grouped-query (Llama) and multi-head (GPT-2: 2 x 6 = 12 at hidden 16) attention.
  const Config wide = tiny_config(with(kLlama, {"--model.kv_channels=16"}));
  const RankPlan wide_plan = whole_model_plan(wide, 2);
  CHECK(wide_plan.table.get("h0.q_w").global_shape == std::vector<long>{64, 32});
  CHECK(wide_plan.table.get("h0.kv_w").global_shape == std::vector<long>{2, 32, 32});
  CHECK(wide_plan.table.get("h0.proj_w").global_shape == std::vector<long>{32, 64});
  CHECK(wide_plan.shape.rotary_dim == 12);  // rotary_percent 0.75 of 16
  check_model_gradient(wide);
  const Config narrow = tiny_config({"--model.kv_channels=6"});
  CHECK(whole_model_plan(narrow, 2).table.get("h0.qkv_w").global_shape == std::vector<long>{3, 12, 16});
  check_model_gradient(narrow);
  // model.qk_layernorm (Qwen3): RMSNorm of each head's queries and keys before RoPE, a weight of HD each.
  const Config qk = tiny_config(with(kLlama, {"--model.qk_layernorm=true", "--model.kv_channels=16"}));
  const RankPlan qk_plan = whole_model_plan(qk, 2);
  CHECK(qk_plan.table.get("h1.qnorm_w").global_shape == std::vector<long>{16});
  CHECK(qk_plan.table.get("h1.knorm_w").global_shape == std::vector<long>{16});
  check_model_gradient(qk);
  // A window of 3 keys over 8 positions: most rows see a strict suffix of their causal keys.
  check_model_gradient(tiny_config(with(kLlama, {"--model.window_size=3"})));
  // Megatron's window_attn_skip_freq: the second block sees every key, the first the window.
  check_model_gradient(tiny_config(with(kLlama, {"--model.window_size=3", "--model.window_attn_skip_freq=2"})));
}

TEST_CASE("MoE model gradient matches finite differences of the loss (router, experts, combine)", "[model][moe]") {
  for (const auto& model : {kMoe, with(kLlama, kMoe)}) {
    const Config cfg = tiny_config(model);
    const RankPlan plan = whole_model_plan(cfg, 2);
    for (const char* name : {"h0.router_w", "h0.expert_fc_w", "h0.expert_fcproj_w", "h1.fc_w"}) CHECK(plan.table.find(name));
    CHECK_FALSE(plan.table.find("h0.fc_w"));
    check_model_gradient(cfg);
  }
}

// training.freeze: with frozen tensors the backward gives every trainable tensor the gradient it has
// without them, bit for bit (the same kernels on the same values: a frozen block still passes its input
// gradient down), and the gradient arena holds the trainable tensors only. GPT: the embedding skipped
// (wte, wpe), a whole block frozen above a trainable one, a norm's weight frozen but not its bias, a
// linear weight but not its bias. Llama with head norms: q and kv together, a head norm, a norm, the
// untied head. MoE: the router and the experts' second layer (weights and biases) frozen, their first
// layer not.
TEST_CASE("frozen tensors leave the trainable ones' gradients as they are, bit for bit", "[model][freeze]") {
  const std::pair<Config, const char*> cases[] = {
      {tiny_config(), "wte,wpe,h1.*,h0.ln1_w,h0.qkv_w,lnf_b"},
      {tiny_config(with(kLlama, {"--model.qk_layernorm=true"})), "h0.q_w,h0.kv_w,h0.knorm_w,h1.ln2_w,lm_head"},
      {tiny_config(kMoe), "h0.router_w,h0.expert_fcproj_*,h1.fc_w"}};
  for (const auto& [all, freeze] : cases) {
    Config some = all;
    some.training.freeze = freeze;
    const RankPlan pa = whole_model_plan(all, 2), pb = whole_model_plan(some, 2);
    const std::unique_ptr<GptModel> ma = make_gpt_model(pa, nullptr, kernels::Backend::host);
    const std::unique_ptr<GptModel> mb = make_gpt_model(pb, nullptr, kernels::Backend::host);
    // The same weights by tensor (the initial ones and noise, as check_model_gradient), in both layouts.
    std::vector<float> wa(pa.arena_size), wb(pb.arena_size);
    init_parameters(pa.table, 7, wa.data());
    init_parameters(pb.table, 7, wb.data());
    std::mt19937 gen(3);
    std::normal_distribution<float> nd(0.0f, 0.3f);
    for (const auto& t : pa.table.tensors()) {
      const TensorSpec& tb = pb.table.get(t.name);
      for (std::size_t i = 0; i < t.numel; ++i) {
        const float r = nd(gen);
        wa[t.offset + i] += r;
        wb[tb.offset + i] += r;
      }
    }
    ma->set_parameters(wa.data());
    mb->set_parameters(wb.data());
    std::uniform_int_distribution<int> tok(0, 31);
    std::vector<int> tokens(static_cast<std::size_t>(ma->dims().N())), targets(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = tok(gen), targets[i] = tok(gen);
    const MicroBatch batch{tokens.data(), targets.data()};
    for (GptModel* m : {ma.get(), mb.get()}) {
      m->grads().zero();
      m->forward(0, 0, batch);
      m->backward(0, 0, batch, 1.0f, nullptr, nullptr);
    }
    CHECK(summed_loss(*ma, batch) == summed_loss(*mb, batch));
    CHECK(mb->grads().bytes() == pb.grad_arena_size * sizeof(float));
    CHECK(pb.grad_arena_size < pa.grad_arena_size);
    int frozen = 0, trainable = 0;
    for (const auto& t : pb.table.tensors()) {
      INFO(freeze << ": " << t.name);
      if (!t.trainable) {
        CHECK(t.offset >= pb.grad_arena_size);
        ++frozen;
        continue;
      }
      const float* ga = ma->grads().as<float>() + pa.table.get(t.name).offset;
      const float* gb = mb->grads().as<float>() + t.offset;
      CHECK(std::equal(ga, ga + t.numel, gb));
      CHECK(std::any_of(gb, gb + t.numel, [](float x) { return x != 0.0f; }));
      ++trainable;
    }
    CHECK(frozen >= 4);
    CHECK(trainable >= 10);
  }
}

namespace {

void check_model_gradient(const Config& cfg) {
  const RankPlan plan = whole_model_plan(cfg, 2);
  const std::unique_ptr<GptModel> model = make_gpt_model(plan, nullptr, kernels::Backend::host);
  std::vector<float> w(plan.arena_size);
  init_parameters(plan.table, 7, w.data());
  // Larger weights than GPT-2's 0.02 so that every path carries signal above float noise.
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  for (const auto& t : plan.table.tensors())
    for (std::size_t i = 0; i < t.numel; ++i) w[t.offset + i] += nd(gen);
  model->set_parameters(w.data());
  std::uniform_int_distribution<int> tok(0, 31);
  std::vector<int> tokens(static_cast<std::size_t>(model->dims().N())), targets(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = tok(gen), targets[i] = tok(gen);
  const MicroBatch batch{tokens.data(), targets.data()};

  model->grads().zero();
  model->forward(0, 0, batch);
  model->backward(0, 0, batch, 1.0f, nullptr, nullptr);  // gradient of the summed token loss
  const float* g = model->grads().as<float>();
  const std::vector<float> grads(g, g + plan.arena_size);

  // Float32 forward: the loss sum L (~50, N token losses) carries rounding noise; each token's loss goes
  // through a few hundred roundings (the longest sums: 4 x hidden and the vocabulary) of random sign,
  // so a random walk of about sqrt(N x 400) u |L| / N ~ 1e-5 absolute, and the two evaluations of the
  // central difference, (up - down) / (2 eps) with eps = 1e-2, differ from it by ~sqrt(2) x 1e-5 / 2e-2
  // = 7e-4 (3 sigma 2e-3: the absolute floor). The difference's own truncation, eps^2 f''' / 6, is
  // relative to the gradient's size: 2% covers third derivatives up to ~1e3 times the first.
  // A missing or wrong term is off by its whole size.
  const float eps = 1e-2f;
  int checked = 0;
  float* p = model->params().as<float>();
  for (const auto& t : plan.table.tensors()) {
    const std::size_t stride = std::max<std::size_t>(1, t.numel / 6);
    for (std::size_t i = 0; i < t.numel; i += stride) {
      float& x = p[t.offset + i];
      const float saved = x;
      x = saved + eps;
      const double up = summed_loss(*model, batch);
      x = saved - eps;
      const double down = summed_loss(*model, batch);
      x = saved;
      const double fd = (up - down) / (2.0 * eps);
      const double an = grads[t.offset + i];
      INFO(t.name << "[" << i << "] analytic " << an << " finite difference " << fd);
      CHECK(std::abs(an - fd) <= 2e-3 + 2e-2 * std::abs(fd));
      ++checked;
    }
  }
  CHECK(checked > 100);
}

}  // namespace

TEST_CASE("initial weights depend only on seed, tensor and global index", "[model]") {
  const Config cfg = tiny_config();
  const RankPlan plan = whole_model_plan(cfg, 2);
  std::vector<float> a(plan.arena_size, -1.0f), b(plan.arena_size, -2.0f);
  init_parameters(plan.table, 11, a.data());
  init_parameters(plan.table, 11, b.data());
  CHECK(a == b);
  // A tensor-parallel slice's global indices address exactly its block of the full tensor.
  const TensorTable half(ModelShape::from(cfg), stage_part(PipelineSplit{2}, 0), 2, 1);
  const TensorSpec& qkv = half.get("h1.qkv_w");  // (3, C, C) split on dim 1: rows C/2..C-1 of q, k and v
  CHECK(qkv.local_shape == std::vector<long>{3, 8, 16});
  CHECK(global_index(qkv, 0) == 8 * 16);
  CHECK(global_index(qkv, 8 * 16) == 16 * 16 + 8 * 16);
  const TensorSpec& fcproj = half.get("h0.fcproj_w");  // (C, F) split on dim 1
  CHECK(global_index(fcproj, 0) == 32);
  CHECK(global_index(fcproj, 32) == 64 + 32);
}

TEST_CASE("runs of a slice cover exactly its elements at their global indices", "[model]") {
  const Config cfg = tiny_config();
  const TensorTable half(ModelShape::from(cfg), stage_part(PipelineSplit{2}, 0), 2, 1);
  for (const auto& t : half.tensors()) {
    for (long begin : {0L, 3L}) {
      const long count = static_cast<long>(t.numel) - begin - (t.numel > 8 ? 5 : 0);
      if (count <= 0) continue;
      long expect = begin;
      for_each_run(t, begin, count, [&](long li, long gi, long len) {
        REQUIRE(li == expect);
        for (long j = 0; j < len; ++j) REQUIRE(global_index(t, li + j) == gi + j);
        expect += len;
      });
      CHECK(expect == begin + count);
    }
  }
}

// The bf16 and fp16 models (16-bit storage, fp32 arithmetic) against the fp32 model on the same
// weights: every stored activation, gradient and weight is rounded to u relative (2^-8 in bf16, 2^-11 in
// fp16): the loss, a mean of cross-entropies of 16-bit logits, within u; a weight gradient is the
// product of a stored upstream gradient and a stored activation, each formed from the 16-bit weights and
// activations of the layer next to it and from the loss's 16-bit logits: 5 roundings, 5u of the largest
// gradient (bf16: 2e-2; measured 4e-6 on the loss and 7e-3 on the gradients). The gradients here are of
// the summed token losses (weight 1), far above fp16's smallest normal 2^-14, so no loss scale is
// needed. A wrong conversion or a buffer read in the wrong type is off by orders of magnitude.
TEMPLATE_TEST_CASE("the 16-bit models follow the fp32 model on the same weights", "[model][bf16]", bf16, fp16) {
  // 2^-8 for bf16, 2^-11 for fp16: the unit roundoff of the storage type.
  const double u = std::is_same_v<TestType, bf16> ? 0x1p-8 : 0x1p-11;
  Config cfg = GENERATE(tiny_config(), tiny_config(kLlama), tiny_config(kMoe));  // GPT-2, Llama and MoE blocks
  const RankPlan plan32 = whole_model_plan(cfg, 2);
  cfg.system.precision = std::is_same_v<TestType, bf16> ? Precision::bf16 : Precision::fp16;
  const RankPlan plan16 = whole_model_plan(cfg, 2);
  const auto m32 = make_gpt_model(plan32, nullptr, kernels::Backend::host);
  const auto m16 = make_gpt_model(plan16, nullptr, kernels::Backend::host);
  std::vector<float> w(plan32.arena_size);
  init_parameters(plan32.table, 3, w.data());
  m32->set_parameters(w.data());
  m16->set_parameters(w.data());
  std::mt19937 gen(4);
  std::uniform_int_distribution<int> tok(0, 31);
  std::vector<int> tokens(static_cast<std::size_t>(m32->dims().N())), targets(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = tok(gen), targets[i] = tok(gen);
  const MicroBatch batch{tokens.data(), targets.data()};
  double loss[2];
  std::vector<float> grads[2];
  int i = 0;
  for (GptModel* m : {m32.get(), m16.get()}) {
    m->grads().zero();
    loss[i] = summed_loss(*m, batch);
    m->backward(0, 0, batch, 1.0f, nullptr, nullptr);
    grads[i].assign(m->grads().as<float>(), m->grads().as<float>() + plan32.arena_size);
    ++i;
  }
  INFO("fp32 loss " << loss[0] << " 16-bit loss " << loss[1]);
  CHECK(std::abs(loss[1] - loss[0]) <= u * std::abs(loss[0]));
  double err = 0.0, scale = 0.0;
  for (std::size_t k = 0; k < grads[0].size(); ++k) {
    err = std::max(err, static_cast<double>(std::abs(grads[1][k] - grads[0][k])));
    scale = std::max(scale, static_cast<double>(std::abs(grads[0][k])));
  }
  INFO("gradients: max difference " << err << " of max " << scale);
  CHECK(err <= 5 * u * scale);
  // The 16-bit weights are the fp32 ones rounded: reading them back gives exactly those roundings.
  std::vector<float> back(plan16.arena_size);
  m16->get_parameters(back.data());
  bool rounded = true;
  for (std::size_t k = 0; k < back.size(); ++k) rounded = rounded && back[k] == to_float(from_float<TestType>(w[k]));
  CHECK(rounded);
}
