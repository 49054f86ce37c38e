// generation_and_packing: two host measurements of what fine-tuning and inference users run, side by
// side with their baselines in the same run, min and median of repeats; prints a table and writes JSON.
//   generation   tokens/s of greedy decoding of a GPT-2 124M-shaped model (random weights; 12 layers,
//                768 wide, vocabulary 50304, seq_length 1024) with the key/value cache against the
//                full-context forward pass per token (the path the cache replaces), from a 16-token prompt
//   packed       the fused attention's forward + backward at T tokens of a sample whose documents are
//                D tokens long (data.reset_attention_mask) against plain causal attention of the same T
//   window       the same with a sliding window (model.window_size) of W keys at T = 4096, against
//                causal attention at that T, beside the share of causal (query, key) pairs the window
//                keeps ((T^2 - (T-W)^2) / T^2 of them: the least time the window can take)
//   build/tools/bench/generation_and_packing [--threads N] [--repeats 3] [--tokens 32] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/cli.hpp"
#include "config/load.hpp"
#include "kernels/attention_scratch.hpp"
#include "kernels/host_runtime.hpp"
#include "kernels/kernels.hpp"
#include "launch/compute_budget.hpp"
#include "model/generate.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/machine.hpp"

using namespace dtrain;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Stats {
  double min, median;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2]};
}

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  int threads = 0, repeats = 3, tokens = 32, nocache_tokens = 4;
  bool help = false;
  std::string json_path = "generation_and_packing.json";
  po::options_description options("Options");
  options.add_options()("help,h", po::bool_switch(&help), "print this help and exit")(
      "threads", po::value(&threads)->default_value(threads), "BLAS threads (0: every core)")(
      "repeats", po::value(&repeats)->default_value(repeats), "repeats of each measurement")(
      "tokens", po::value(&tokens)->default_value(tokens), "tokens generated with the cache per repeat")(
      "no-cache-tokens", po::value(&nocache_tokens)->default_value(nocache_tokens),
      "tokens generated without the cache per repeat (each a forward pass over 1024 positions)")(
      "json", po::value(&json_path)->default_value(json_path), "JSON output file");
  parse_command_line_options(argc, argv, 1, options, {}, "generation_and_packing");
  if (help) {
    std::cout << "usage: generation_and_packing [--threads N] [--repeats N] [--tokens N] [--no-cache-tokens N] [--json FILE]\n" << options;
    return 0;
  }
  if (repeats < 1 || tokens < 1 || nocache_tokens < 1) throw UserError("generation_and_packing: counts must be >= 1");
  kernels::HostRuntime host;
  std::string warning;
  threads = configure_blas_threads(threads > 0 ? threads : cores_available(), cores_available(), cores_available(), 1, warning);

  // ---- generation: GPT-2 124M shape.
  const Config cfg = load_config("[model]\nnum_layers=12\nhidden_size=768\nnum_attention_heads=12\nseq_length=1024\nvocab_size=50304\n"
                                 "global_batch_size=1\nmicro_batch_size=1\n",
                                 "generation bench", {});
  const RankPlan plan = whole_model_plan(cfg, 1);
  std::vector<float> w(plan.arena_size);
  init_parameters(plan.table, 1, w.data());
  const auto model = make_gpt_model(plan, nullptr, kernels::Backend::host);
  model->set_parameters(w.data());
  std::vector<std::uint32_t> prompt(16);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::uint32_t>(100 + 37 * i);
  std::vector<double> cached, full;
  for (int r = 0; r < repeats; ++r) {  // alternating, so that both see the same machine
    SamplingOptions o;
    auto t0 = Clock::now();
    generate(*model, {prompt}, 50257, tokens, o);
    cached.push_back(tokens / since(t0));
    o.use_cache = false;
    t0 = Clock::now();
    generate(*model, {prompt}, 50257, nocache_tokens, o);
    full.push_back(nocache_tokens / since(t0));
  }
  const Stats c = stats(cached), f = stats(full);
  std::printf("generation, GPT-2 124M shape, %d BLAS thread(s): key/value cache %.2f tokens/s (min %.2f), full context %.3f tokens/s "
              "(min %.3f): %.0fx\n",
              threads, c.median, c.min, f.median, f.min, c.median / f.median);

  // ---- packed documents: attention forward + backward, fp32, B = 1, 12 heads of 64.
  const int T = 1024, NH = 12, HD = 64, W = 3 * NH * HD;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int long_T = 4096, window_heads = 4;  // the window's measurement: 4 heads of 64 at T = 4096
  std::vector<float> qkv(static_cast<std::size_t>(long_T) * W), dout(static_cast<std::size_t>(long_T) * NH * HD);
  for (float& x : qkv) x = u(rng);
  for (float& x : dout) x = u(rng);
  std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(NH) * long_T), dqkv(qkv.size()),
      scratch(kernels::attention_scratch_floats(1, long_T, NH));
  // Forward + backward of one sample of `t` rows and `heads` heads of 64 (the buffers hold the largest).
  const auto time_attention = [&](kernels::KeyVisibility visible, int t, int heads) {
    std::vector<double> s;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = Clock::now();
      kernels::host::attention_forward(out.data(), lse.data(), scratch.data(), qkv.data(), visible, 1, t, heads, heads, HD);
      kernels::host::attention_backward(dqkv.data(), scratch.data(), dout.data(), out.data(), lse.data(), qkv.data(), visible, 1, t, heads,
                                        heads, HD);
      s.push_back(since(t0));
    }
    return stats(s);
  };
  std::FILE* json = std::fopen(json_path.c_str(), "w");
  if (!json) throw UserError("cannot write " + json_path);
  std::fprintf(json, "{\"threads\": %d, \"generation\": {\"model\": \"GPT-2 124M shape (12 x 768, V 50304, T 1024)\", \"prompt_tokens\": 16, "
               "\"cache_tokens_per_s\": {\"min\": %.4f, \"median\": %.4f}, \"no_cache_tokens_per_s\": {\"min\": %.4f, \"median\": %.4f}, "
               "\"speedup_median\": %.2f},\n \"packed_attention\": {\"T\": %d, \"heads\": %d, \"head_dim\": %d, \"rows\": [",
               threads, c.min, c.median, f.min, f.median, c.median / f.median, T, NH, HD);
  const Stats causal = time_attention({}, T, NH);
  std::printf("packed attention, T = %d, %d heads of %d, forward + backward: causal %.1f ms (min %.1f)\n", T, NH, HD, 1e3 * causal.median,
              1e3 * causal.min);
  bool first = true;
  for (const int doc : {512, 256, 128, 64}) {
    std::vector<int> ds(static_cast<std::size_t>(T));
    for (int t = 0; t < T; ++t) ds[static_cast<std::size_t>(t)] = t / doc * doc;
    const Stats p = time_attention({ds.data(), 0}, T, NH);
    std::printf("  documents of %4d tokens: %.1f ms (min %.1f): %.2fx causal's time\n", doc, 1e3 * p.median, 1e3 * p.min, p.median / causal.median);
    std::fprintf(json, "%s{\"document_tokens\": %d, \"ms\": {\"min\": %.3f, \"median\": %.3f}, \"causal_ms\": {\"min\": %.3f, \"median\": %.3f}, "
                 "\"ratio_median\": %.3f}", first ? "" : ", ", doc, 1e3 * p.min, 1e3 * p.median, 1e3 * causal.min, 1e3 * causal.median,
                 p.median / causal.median);
    first = false;
  }
  // ---- sliding window: T = 4096, windows of 1024 and 512 keys.
  const Stats long_causal = time_attention({}, long_T, window_heads);
  std::printf("sliding window, T = %d, %d heads of %d, forward + backward: causal %.1f ms (min %.1f)\n", long_T, window_heads, HD,
              1e3 * long_causal.median, 1e3 * long_causal.min);
  std::fprintf(json, "]},\n \"window_attention\": {\"T\": %d, \"heads\": %d, \"head_dim\": %d, \"causal_ms\": {\"min\": %.3f, \"median\": %.3f}, "
               "\"rows\": [", long_T, window_heads, HD, 1e3 * long_causal.min, 1e3 * long_causal.median);
  first = true;
  for (const int window : {1024, 512}) {
    const Stats w = time_attention({nullptr, window}, long_T, window_heads);
    const double kept = (double(long_T) * long_T - double(long_T - window) * (long_T - window)) / (double(long_T) * long_T);
    std::printf("  window of %4d keys: %.1f ms (min %.1f): %.2fx causal's time (the window keeps %.2f of the causal pairs)\n", window,
                1e3 * w.median, 1e3 * w.min, w.median / long_causal.median, kept);
    std::fprintf(json, "%s{\"window\": %d, \"ms\": {\"min\": %.3f, \"median\": %.3f}, \"ratio_median\": %.3f, \"pairs_kept\": %.4f}",
                 first ? "" : ", ", window, 1e3 * w.min, 1e3 * w.median, w.median / long_causal.median, kept);
    first = false;
  }
  std::fprintf(json, "]}}\n");
  std::fclose(json);
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run_tool("generation_and_packing", argc, argv, run); }
