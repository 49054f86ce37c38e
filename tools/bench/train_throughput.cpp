// train_throughput: single-rank training-step speed on fixed GPT shapes, next to this machine's sgemm
// ceiling measured in the same run. Prints a table and writes JSON.
//   build/tools/bench/train_throughput [--threads 1] [--steps 6] [--repeats 3] [--json FILE] [--only NAME]
// A step is forward + backward over the micro-batch and one AdamW update, on random tokens (no data I/O).
// FLOPs per token = 6 x (parameters used in matmuls) + 12 x layers x T x d (attention matmuls).
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "model/gpt.hpp"
#include "optim/adamw.hpp"
#include "train/machine_peak.hpp"

using namespace dtrain;

namespace {

struct BenchConfig {
  const char* name;
  int layers, hidden, heads, seq, vocab, batch;
};

const BenchConfig kConfigs[] = {
    {"L6-d384-V256", 6, 384, 6, 256, 256, 8},
    {"L12-d768-V50304", 12, 768, 12, 256, 50304, 4},
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, steps = 6, repeats = 3;
  std::string json_path = "train_throughput.json", only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::stoi(argv[i + 1]);
    else if (a == "--steps") steps = std::stoi(argv[i + 1]);
    else if (a == "--repeats") repeats = std::stoi(argv[i + 1]);
    else if (a == "--json") json_path = argv[i + 1];
    else if (a == "--only") only = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: train_throughput [--threads N] [--steps N] [--repeats N] [--json FILE] [--only NAME]\n");
      return 2;
    }
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  configure_blas_threads(threads, 1);
  const double ceiling = measure_sgemm_gflops(1024, 1.0);
  std::printf("sgemm ceiling (1024^3, %d thread(s), best of 1 s): %.1f GFLOP/s\n", threads, ceiling);
  std::printf("FLOPs/token = 6 x matmul parameters + 12 x layers x T x d\n");
  std::printf("%-18s %10s %12s %12s %10s %9s\n", "config", "tokens/s", "ms/step med", "ms/step min", "GFLOP/s", "of sgemm");

  std::FILE* json = std::fopen(json_path.c_str(), "w");
  if (!json) {
    std::fprintf(stderr, "train_throughput: cannot write %s\n", json_path.c_str());
    return 1;
  }
  std::fprintf(json, "{\"threads\": %d, \"sgemm_gflops\": %.2f, \"configs\": [", threads, ceiling);
  bool first = true;
  const auto& k = kernels::kernel_table(kernels::Backend::host);
  for (const auto& bc : kConfigs) {
    if (!only.empty() && only != bc.name) continue;
    char ini[512];
    std::snprintf(ini, sizeof ini,
                  "[model]\nnum_layers=%d\nhidden_size=%d\nnum_attention_heads=%d\nseq_length=%d\nvocab_size=%d\n"
                  "global_batch_size=%d\nmicro_batch_size=%d\n",
                  bc.layers, bc.hidden, bc.heads, bc.seq, bc.vocab, bc.batch, bc.batch);
    Config cfg = load_config(ini, bc.name, {});
    cfg.model.micro_batch = bc.batch;
    GptModel model(cfg, stage_part(bc.layers, 1, 1, 0), nullptr, 0, k, 1);
    model.init_parameters(1);
    AdamW adamw(model.table(), cfg.optimizer, k, {{0, model.params().size()}});
    SlotActs& s = model.activations().slot(0);
    std::mt19937 gen(1);
    std::uniform_int_distribution<int> tok(0, bc.vocab - 1);
    for (long i = 0; i < model.dims().N(); ++i) s.tokens[i] = tok(gen), s.targets[i] = tok(gen);
    const double tokens = static_cast<double>(bc.batch) * bc.seq;
    auto one_step = [&](int t) {
      model.grads().zero();
      model.forward(0);
      model.backward(0, 0, static_cast<float>(1.0 / tokens));
      adamw.step(model.params(), model.grads(), 1e-4, t);
    };
    one_step(1);  // warm-up: first touch of every page
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r)
      for (int i = 0; i < steps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        one_step(2 + r * steps + i);
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    const double med = median(times), best = *std::min_element(times.begin(), times.end());
    const double gflops = model_flops_per_token(cfg) * tokens / med / 1e9;
    std::printf("%-18s %10.0f %12.1f %12.1f %10.1f %8.1f%%\n", bc.name, tokens / med, 1e3 * med, 1e3 * best, gflops,
                100.0 * gflops / ceiling);
    std::fflush(stdout);
    std::fprintf(json,
                 "%s{\"name\": \"%s\", \"tokens_per_s\": %.1f, \"ms_per_step_median\": %.3f, \"ms_per_step_min\": %.3f, "
                 "\"gflops\": %.2f, \"fraction_of_sgemm\": %.4f, \"flops_per_token\": %.0f, \"steps\": %zu}",
                 first ? "" : ", ", bc.name, tokens / med, 1e3 * med, 1e3 * best, gflops, gflops / ceiling,
                 model_flops_per_token(cfg), times.size());
    first = false;
  }
  std::fprintf(json, "]}\n");
  std::fclose(json);
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
