// Generation with the key/value cache on the GPU: greedy decoding through the cache gives the no-cache
// path's tokens on the same GPU (fp32 and bf16: both paths run the same CUDA kernels but for the
// attention of the new rows, the block kernel against the cache where the full pass runs the fused
// one), and in fp32 the host's tokens. Weights are 4x the initial ones, as in the host test
// (tests/unit/test_generate.cpp): clear greedy choices. Every chosen logit's lead over the runner-up is
// checked to exceed the difference the two paths may have (fp32: 2 n u of max |logit| for the n = 768
// products along a logit's path; bf16: 2 x 2^-8, the attention's probabilities and output rounded once
// more on one path), so that an agreement is not luck.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "config/load.hpp"
#include "model/generate.hpp"
#include "model/gpt.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/arena.hpp"

using namespace dtrain;

namespace {

std::unique_ptr<GptModel> model_on(kernels::Backend backend, const std::string& precision, bool llama) {
  std::string text = "[model]\nnum_layers=2\nhidden_size=64\nnum_attention_heads=4\nseq_length=32\nvocab_size=96\n"
                     "global_batch_size=1\nmicro_batch_size=1\nffn_hidden_size=256\n";
  if (llama)
    text += "normalization=RMSNorm\nposition_embedding_type=rope\nswiglu=true\ngroup_query_attention=true\n"
            "num_query_groups=2\nuntie_embeddings_and_output_weights=true\nadd_bias_linear=false\n";
  text += "[system]\nprecision=" + precision + "\n";
  const RankPlan plan = whole_model_plan(load_config(text, "gpu generation test", {}), 1);
  std::vector<float> w(plan.arena_size);
  init_parameters(plan.table, 99, w.data());
  for (float& x : w) x *= 4.0f;
  auto model = make_gpt_model(plan, nullptr, backend);
  model->set_parameters(w.data());
  return model;
}

// The smallest lead of each greedy choice over the runner-up, relative to the row's largest |logit|,
// along the tokens `chosen` continue `prompt` with (the full-context logits on the model's device).
double smallest_lead(GptModel& model, const std::vector<std::uint32_t>& prompt, const std::vector<std::uint32_t>& chosen) {
  std::vector<int> seq(prompt.begin(), prompt.end());
  seq.insert(seq.end(), chosen.begin(), chosen.end() - 1);
  std::vector<int> in(32, 0), tg(32, 0);
  std::copy(seq.begin(), seq.end(), in.begin());
  Arena ids(model.device(), 2 * in.size() * sizeof(int));
  model.device().copy(ids.data(), in.data(), in.size() * sizeof(int));
  model.device().copy(ids.as<int>() + in.size(), tg.data(), tg.size() * sizeof(int));
  model.forward(0, 0, MicroBatch{ids.as<int>(), ids.as<int>() + in.size()});
  double lead = INFINITY;
  std::vector<float> row(96);
  for (std::size_t i = prompt.size() - 1; i < seq.size(); ++i) {
    model.logits_row(0, static_cast<long>(i), row.data());
    double scale = 0.0;
    for (float x : row) scale = std::max(scale, std::fabs(static_cast<double>(x)));
    std::vector<float> r = row;
    std::nth_element(r.begin(), r.begin() + 1, r.end(), std::greater<float>());
    lead = std::min(lead, (r[0] - r[1]) / scale);
  }
  return lead;
}

}  // namespace

TEST_CASE("greedy generation with the key/value cache on the GPU gives the no-cache path's tokens", "[gpu][generate]") {
  const std::vector<std::vector<std::uint32_t>> prompts = {{3}, {10, 20, 30, 40}, {7, 7, 8}};
  for (const std::string precision : {"fp32", "bf16"})
    for (const bool llama : {false, true}) {
      INFO(precision << (llama ? " Llama" : " GPT-2"));
      const auto gpu = model_on(kernels::Backend::cuda, precision, llama);
      SamplingOptions greedy;
      const auto cached = generate(*gpu, prompts, 96, 24, greedy);
      greedy.use_cache = false;
      const auto full = generate(*gpu, prompts, 96, 24, greedy);
      const double allowed = precision == "fp32" ? 2.0 * 768 * 0x1p-24 : 2 * 0x1p-8;
      for (std::size_t b = 0; b < prompts.size(); ++b) {
        const double lead = smallest_lead(*gpu, prompts[b], full[b]);
        std::printf("cuda generate %s %s prompt %zu: cache %s the no-cache path's 24 tokens; smallest lead %.2e (needs > %.2e)\n",
                    precision.c_str(), llama ? "llama" : "gpt2", b, cached[b] == full[b] ? "equals" : "DIFFERS FROM", lead, 2 * allowed);
        CHECK(lead > 2 * allowed);
        CHECK(cached[b] == full[b]);
      }
      if (precision == "fp32") {
        const auto host = model_on(kernels::Backend::host, "fp32", llama);
        SamplingOptions host_greedy;
        CHECK(generate(*host, prompts, 96, 24, host_greedy) == cached);
      }
    }
}
