// The zero-bubble schedules' split backward on one rank: B (backward_input) of two micro-batches in
// two slots, then their Ws (backward_weight), give the parameter gradients and the stage's input
// gradient of the joined backward() bit for bit, for every block type (GPT-2; Llama: RMSNorm, RoPE,
// SwiGLU, grouped-query attention, no biases; MoE router and experts), the embedding and the LM head
// (tied and untied), with selective and full recomputation, in fp32, bf16 and fp16 (the host
// kernels; tests/gpu has the CUDA twin), and in fp8 (whose weight half quantizes the kept operands at W,
// model/linear_gemms.hpp). Both stages of a two-stage pipeline are run: the first holds
// the embedding and takes an output gradient, the last holds the head and gives an input gradient.
// Exact equality is the claim: W makes the same GEMMs on the same operands, in the same order per
// tensor, as the joined backward.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "common/storage_type.hpp"
#include "config/load.hpp"
#include "model/gpt.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;

namespace {

Config split_config(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"--system.pipeline_model_parallel_size=2", "--system.pipeline_schedule=zb-h1"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_config("[model]\nnum_layers=4\nhidden_size=16\nnum_attention_heads=2\nseq_length=8\nvocab_size=32\n"
                     "global_batch_size=4\nmicro_batch_size=2\n",
                     "split", all);
}

const std::vector<std::string> kLlama = {
    "--model.hidden_size=32", "--model.num_attention_heads=4", "--model.normalization=RMSNorm", "--model.position_embedding_type=rope",
    "--model.rotary_percent=0.75", "--model.swiglu=true", "--model.ffn_hidden_size=24", "--model.group_query_attention=true",
    "--model.num_query_groups=2", "--model.untie_embeddings_and_output_weights=true", "--model.add_bias_linear=false"};
const std::vector<std::string> kMoe = {"--model.num_experts=3", "--model.moe_router_topk=2", "--model.moe_ffn_hidden_size=12",
                                       "--model.moe_layer_freq=2"};

template <typename T>
std::vector<T> random_values(std::size_t n, std::mt19937& gen) {
  std::normal_distribution<float> nd(0.0f, 0.5f);
  std::vector<T> v(n);
  for (auto& x : v) x = from_float<T>(nd(gen));
  return v;
}

// Gradients (and input gradients) of two micro-batches on one stage, joined or split.
template <typename T>
void check_stage(const Config& cfg, int stage) {
  const TrainingPlan tplan = make_plan(cfg, 2);
  REQUIRE(tplan.num_micro_batches == 2);
  const RankPlan plan = make_rank_plan(cfg, tplan, Coords{0, 0, 0, stage});
  REQUIRE(plan.activations.split_backward);
  REQUIRE(plan.activations.slots == 2);
  const auto joined = make_gpt_model(plan, nullptr, kernels::Backend::host);
  const auto split = make_gpt_model(plan, nullptr, kernels::Backend::host);
  std::vector<float> w(plan.arena_size);
  init_parameters(plan.table, 11, w.data());
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  for (float& x : w) x += nd(gen);  // weights well away from GPT-2's small ones: every path carries signal
  joined->set_parameters(w.data());
  split->set_parameters(w.data());
  const std::size_t rows = joined->message_count();
  std::uniform_int_distribution<int> tok(0, 31);
  std::vector<int> tokens(static_cast<std::size_t>(2 * joined->dims().N())), targets(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = tok(gen), targets[i] = tok(gen);
  const bool first = plan.part.embedding, last = plan.part.head;
  std::vector<T> inputs = random_values<T>(2 * rows, gen), output_grads = random_values<T>(2 * rows, gen);
  std::vector<T> joined_dx(2 * rows), split_dx(2 * rows);
  const auto batch = [&](int mb) {
    const long at = static_cast<long>(mb) * joined->dims().N();
    return MicroBatch{tokens.data() + at, targets.data() + at};
  };
  const auto forward = [&](GptModel& m, int mb) {
    if (!first) std::memcpy(m.stage_input(mb), inputs.data() + mb * rows, rows * sizeof(T));
    m.forward(mb, 0, batch(mb));
  };
  const auto grad_out = [&](int mb) { return last ? nullptr : output_grads.data() + mb * rows; };
  const auto grad_in = [&](std::vector<T>& dx, int mb) { return first ? nullptr : dx.data() + mb * rows; };
  joined->grads().zero();
  split->grads().zero();
  for (int mb = 0; mb < 2; ++mb) forward(*joined, mb);
  for (int mb = 0; mb < 2; ++mb) joined->backward(mb, 0, batch(mb), 0.25f, grad_out(mb), grad_in(joined_dx, mb));
  for (int mb = 0; mb < 2; ++mb) forward(*split, mb);
  // Both Bs before either W: the slots keep what their Ws need apart.
  for (int mb = 0; mb < 2; ++mb) split->backward_input(mb, 0, batch(mb), 0.25f, grad_out(mb), grad_in(split_dx, mb));
  for (int mb = 0; mb < 2; ++mb) split->backward_weight(mb, 0);
  const float* a = joined->grads().as<float>();
  const float* b = split->grads().as<float>();
  int nonzero = 0;
  for (const auto& t : plan.table.tensors()) {
    INFO(t.name);
    CHECK(std::memcmp(a + t.offset, b + t.offset, t.numel * sizeof(float)) == 0);
    for (std::size_t i = 0; i < t.numel; ++i) nonzero += a[t.offset + i] != 0.0f;
  }
  CHECK(nonzero > static_cast<int>(plan.table.total() / 2));  // the comparison is of real gradients
  if (!first) CHECK(std::memcmp(joined_dx.data(), split_dx.data(), joined_dx.size() * sizeof(T)) == 0);
}

template <typename T>
void check_model(const std::vector<std::string>& overrides) {
  const Config cfg = split_config(overrides);
  for (int stage : {0, 1}) {
    INFO("stage " << stage);
    check_stage<T>(cfg, stage);
  }
}

}  // namespace

namespace {

// Every block type and recomputation of the file's header, at `precision` (storage type T).
template <typename T>
void check_models(const std::string& precision) {
  const std::vector<std::string> p = {"--system.precision=" + precision};
  SECTION("GPT-2 blocks, tied embedding") { check_model<T>(p); }
  SECTION("Llama blocks, untied head") {
    auto o = p;
    o.insert(o.end(), kLlama.begin(), kLlama.end());
    check_model<T>(o);
  }
  SECTION("MoE router and experts") {
    auto o = p;
    o.insert(o.end(), kMoe.begin(), kMoe.end());
    check_model<T>(o);
  }
  SECTION("selective recomputation") {
    auto o = p;
    o.push_back("--model.recompute_granularity=selective");
    check_model<T>(o);
  }
  SECTION("full recomputation, MoE") {
    auto o = p;
    o.insert(o.end(), kMoe.begin(), kMoe.end());
    o.insert(o.end(), {"--model.recompute_granularity=full", "--model.recompute_num_layers=2"});
    check_model<T>(o);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("B then W equals the joined backward bit for bit", "[model][zero-bubble]", float, bf16, fp16) {
  check_models<TestType>(std::is_same_v<TestType, float> ? "fp32" : std::is_same_v<TestType, bf16> ? "bf16" : "fp16");
}

TEST_CASE("B then W equals the joined backward bit for bit in fp8", "[model][zero-bubble][fp8]") { check_models<bf16>("fp8"); }
