// Generation with a key/value cache against the full-context forward pass it replaces: teacher-forced,
// every position's logits agree within the bound of reordered fp32 sums, for a batch of prompts of
// different lengths, more rows than one decode pass takes (GPT-2, Llama and MoE blocks); greedy decoding
// gives the same tokens on both paths in fp32, bf16 and fp8 and with MoE blocks; and top-k / top-p
// sampling keeps to its candidates.
// Tolerance: the cache computes each row with the same kernels on the same inputs, but a GEMM of a few
// rows may sum in another order than one of T rows, and attention over the cache is the block kernel's
// online softmax where the full pass runs the fused kernel. A logit sums, along its path, at most n =
// layers x (C + T + F) + C products (QKV, attention over T keys, the MLP's F inputs, the head); two
// orders of such sums differ by at most 2 n u of their magnitudes (u = 2^-24; a MoE block adds its k
// experts' weighted outputs: k more terms), and the magnitudes here
// (weights 4x the initial ones, so that the layers hardly amplify them) stay within the largest logit: 2 n u of
// max |logit|. A wrong position, a stale cache row or a missed key is 1e-2 or more.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/load.hpp"
#include "kernels/host_runtime.hpp"
#include "model/generate.hpp"
#include "model/gpt.hpp"
#include "model/kv_decoder.hpp"
#include "plan/rank_plan.hpp"

using namespace dtrain;

namespace {

constexpr int kLayers = 2, kC = 64, kT = 32, kF = 256, kV = 96, kTopK = 2;

// moe: Llama blocks whose MLPs are 4 experts, 2 per token; local_global: Llama blocks with a window of 9
// keys in the first and every key in the second (window_attn_skip_freq = 2: the cache keeps every
// position); wide: Qwen3-like Llama blocks with heads of 32
// dims (model.kv_channels: 128 attention columns at hidden 64), their queries and keys normalised
// (qk_layernorm), and a sliding window of 9 keys: the cache keeps 25 slots of the 32 positions, so
// prompts go in pieces of 9 rows and the longest sequence's keys move to the front.
enum class Block { gpt2, llama, moe, local_global, wide };

const char* name(Block b) {
  return b == Block::gpt2 ? "GPT-2" : b == Block::llama ? "Llama" : b == Block::moe ? "MoE" : b == Block::local_global ? "local and global" : "wide heads";
}

Config model_config(Block block, const std::string& precision = "fp32") {
  std::string text = "[model]\nnum_layers=2\nhidden_size=64\nnum_attention_heads=4\nseq_length=32\nvocab_size=96\n"
                     "global_batch_size=1\nmicro_batch_size=1\nffn_hidden_size=256\n";
  if (block != Block::gpt2)
    text += "normalization=RMSNorm\nposition_embedding_type=rope\nswiglu=true\ngroup_query_attention=true\nnum_query_groups=2\n"
            "untie_embeddings_and_output_weights=true\nadd_bias_linear=false\n";
  if (block == Block::moe) text += "num_experts=4\nmoe_router_topk=" + std::to_string(kTopK) + "\n";
  if (block == Block::wide) text += "kv_channels=32\nwindow_size=9\nqk_layernorm=true\n";
  if (block == Block::local_global) text += "window_size=9\nwindow_attn_skip_freq=2\n";
  text += "[system]\nprecision=" + precision + "\n";
  return load_config(text, "generation test", {});
}

// A model with weights 4 x the initial ones: logits spread enough for clear greedy choices, while the
// layers amplify rounding differences little (the measured differences stay 30x below the bound).
std::unique_ptr<GptModel> scaled_model(const Config& cfg) {
  const RankPlan plan = whole_model_plan(cfg, 1);
  std::vector<float> w(plan.arena_size);
  init_parameters(plan.table, 99, w.data());
  for (float& x : w) x *= 4.0f;
  auto model = make_gpt_model(plan, nullptr, kernels::Backend::host);
  model->set_parameters(w.data());
  return model;
}

// The full-context logits of every position of `tokens` (at most T).
std::vector<std::vector<float>> full_logits(GptModel& model, const std::vector<int>& tokens) {
  std::vector<int> in(kT, 0), tg(kT, 0);
  std::copy(tokens.begin(), tokens.end(), in.begin());
  model.forward(0, 0, MicroBatch{in.data(), tg.data()});
  std::vector<std::vector<float>> out(tokens.size(), std::vector<float>(kV));
  for (std::size_t i = 0; i < tokens.size(); ++i) model.logits_row(0, static_cast<long>(i), out[i].data());
  return out;
}

double relative_error(const float* got, const std::vector<float>& want) {
  double err = 0.0, scale = 0.0;
  for (int v = 0; v < kV; ++v) {
    err = std::max(err, std::fabs(static_cast<double>(got[v]) - want[static_cast<std::size_t>(v)]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[static_cast<std::size_t>(v)])));
  }
  return err / scale;
}

}  // namespace

TEST_CASE("the key/value cache gives the full forward pass's logits at every position", "[generate]") {
  kernels::HostRuntime host;
  const double tolerance = 2.0 * (kLayers * (kC + kT + kF + kTopK) + kC) * 0x1p-24;
  for (const Block block : {Block::gpt2, Block::llama, Block::moe, Block::local_global, Block::wide}) {
    INFO(name(block));
    const auto model = scaled_model(model_config(block));
    // Three sequences: prompts of 1, 17 and 20 tokens (38 rows: a decode pass takes the micro-batch's 32,
    // so the third prompt is cut over two passes), then one token at a time to 20, 24 and 32 tokens.
    std::vector<std::vector<int>> seqs(3);
    const int lengths[3] = {20, 24, kT};
    for (std::size_t b = 0; b < 3; ++b)
      for (int t = 0; t < lengths[b]; ++t) seqs[b].push_back((7 * t + 13 * static_cast<int>(b) + 5) % kV);
    const std::vector<int> prompt = {1, 17, 20};
    std::vector<std::vector<std::vector<float>>> want;
    for (const auto& s : seqs) want.push_back(full_logits(*model, s));
    const auto decoder = model->make_decoder(3);
    REQUIRE(decoder);
    std::vector<float> logits(3 * kV);
    std::vector<std::size_t> at(3, 0);
    double worst = 0.0;
    for (int round = 0;; ++round) {
      std::vector<std::vector<int>> add(3);
      bool any = false;
      for (std::size_t b = 0; b < 3; ++b) {
        const std::size_t n = round == 0 ? static_cast<std::size_t>(prompt[b]) : 1;
        if (at[b] + n > seqs[b].size()) continue;
        add[b].assign(seqs[b].begin() + static_cast<long>(at[b]), seqs[b].begin() + static_cast<long>(at[b] + n));
        any = true;
      }
      if (!any) break;
      decoder->extend(add, logits.data());
      for (std::size_t b = 0; b < 3; ++b) {
        if (add[b].empty()) continue;
        at[b] += add[b].size();
        CHECK(decoder->length(static_cast<int>(b)) == static_cast<int>(at[b]));
        const double e = relative_error(logits.data() + b * kV, want[b][at[b] - 1]);
        worst = std::max(worst, e);
        INFO("sequence " << b << ", position " << at[b] - 1);
        CHECK(e <= tolerance);
      }
    }
    CHECK(at == std::vector<std::size_t>{seqs[0].size(), seqs[1].size(), seqs[2].size()});
    WARN("largest relative logit difference " << worst << " (tolerance " << tolerance << ")");
  }
}

TEST_CASE("greedy generation with the cache gives the no-cache path's tokens", "[generate]") {
  kernels::HostRuntime host;
  const double tolerance = 2.0 * (kLayers * (kC + kT + kF + kTopK) + kC) * 0x1p-24;
  const std::pair<Block, const char*> cases[] = {{Block::gpt2, "fp32"}, {Block::llama, "fp32"}, {Block::moe, "fp32"},
                                                 {Block::llama, "bf16"}, {Block::llama, "fp8"},   {Block::moe, "bf16"},
                                                 {Block::gpt2, "fp8"}};
  for (const auto& [block, precision] : cases) {
    INFO(name(block) << " in " << precision);
    const auto model = scaled_model(model_config(block, precision));
    REQUIRE(model->make_decoder(3));  // the cache applies (else generate would quietly compare the full path with itself)
    const std::vector<std::vector<std::uint32_t>> prompts = {{3}, {10, 20, 30, 40}, {7, 7, 8}};
    SamplingOptions greedy;
    const auto cached = generate(*model, prompts, kV, 24, greedy);
    greedy.use_cache = false;
    const auto full = generate(*model, prompts, kV, 24, greedy);
    CHECK(cached == full);
    // In fp32 the comparison means something only where the choices were clear: every chosen logit above
    // the runner-up by more than both paths' difference can move them. (16-bit and fp8 runs round the
    // rows of a pass as the full pass does, but fp8 scales each linear layer's input by the pass's
    // amax; their choices must agree all the same on these clear models.)
    if (std::string(precision) != "fp32") continue;
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      std::vector<int> seq(prompts[b].begin(), prompts[b].end());
      seq.insert(seq.end(), full[b].begin(), full[b].end() - 1);
      const auto rows = full_logits(*model, seq);
      for (std::size_t i = prompts[b].size() - 1; i < seq.size(); ++i) {
        std::vector<float> r = rows[i];
        const float top = *std::max_element(r.begin(), r.end());
        double scale = 0.0;
        for (float x : r) scale = std::max(scale, std::fabs(static_cast<double>(x)));
        std::nth_element(r.begin(), r.begin() + 1, r.end(), std::greater<float>());
        CHECK(top - r[1] > 2 * tolerance * scale);
      }
    }
  }
}

TEST_CASE("sampling keeps to the top-k and top-p candidates and repeats with its seed", "[generate]") {
  // Logits 0..9 in reverse: token 0 the most probable.
  std::vector<float> logits(10);
  for (int v = 0; v < 10; ++v) logits[static_cast<std::size_t>(v)] = static_cast<float>(9 - v) * 0.5f;
  SamplingOptions o;
  CHECK(sample_token(logits.data(), 10, o, 0.99) == 0);  // greedy whatever the draw
  o.temperature = 1.0;
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(sample_token(logits.data(), 10, o, (i + 0.5) / 1000.0));
  CHECK(seen.size() == 10);  // without a cut every token is reachable
  o.top_k = 3;
  seen.clear();
  for (int i = 0; i < 1000; ++i) seen.insert(sample_token(logits.data(), 10, o, (i + 0.5) / 1000.0));
  CHECK(seen == std::set<std::uint32_t>{0, 1, 2});
  // top-p: weights e^{-v/2} (v = 0..9) normalised; the first two hold 0.39 + 0.24 = 0.63 of the mass, three
  // 0.78: p = 0.7 keeps three tokens.
  o.top_k = 0, o.top_p = 0.7;
  seen.clear();
  for (int i = 0; i < 1000; ++i) seen.insert(sample_token(logits.data(), 10, o, (i + 0.5) / 1000.0));
  CHECK(seen == std::set<std::uint32_t>{0, 1, 2});
  o.top_p = 1e-6;  // only the most probable
  CHECK(sample_token(logits.data(), 10, o, 0.99) == 0);
  // The same seed, the same tokens (the cache and no cache draw alike).
  kernels::HostRuntime host;
  const auto model = scaled_model(model_config(Block::gpt2));
  SamplingOptions s;
  s.temperature = 1.0, s.top_k = 20, s.seed = 5;
  const auto a = generate(*model, {{1, 2}}, kV, 16, s), b = generate(*model, {{1, 2}}, kV, 16, s);
  CHECK(a == b);
}
