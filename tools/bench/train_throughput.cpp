// train_throughput: single-rank training-step speed on fixed GPT shapes, next to this machine's sgemm
// ceiling measured in the same run. Prints a table and writes JSON.
//   build/tools/bench/train_throughput [--threads 1] [--steps 6] [--repeats 3] [--json FILE] [--only NAME]
//                                      [--precision fp32|bf16]
// A step is forward + backward over the micro-batch and one AdamW update, on random tokens (no data I/O).
// FLOPs per token: plan/model_flops.hpp (6 x matmul parameters + the causal half of attention).
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
#include "kernels/host_runtime.hpp"
#include "launch/compute_budget.hpp"
#include "model/gpt.hpp"
#include "optim/adamw.hpp"
#include "plan/model_flops.hpp"
#include "runtime/machine.hpp"

using namespace dtrain;

namespace {

struct BenchConfig {
  const char* name;
  int layers, hidden, heads, seq, vocab, batch;
  const char* extra;  // more [model] keys
};

const BenchConfig kConfigs[] = {
    {"L6-d384-V256", 6, 384, 6, 256, 256, 8, ""},
    {"L12-d768-V50304", 12, 768, 12, 256, 50304, 4, ""},
    // Llama blocks: RMSNorm, RoPE, SwiGLU, 8 query heads on 2 key/value groups, untied, no biases.
    {"llama-L8-d512-V32000", 8, 512, 8, 256, 32000, 4,
     "normalization=RMSNorm\nposition_embedding_type=rope\nswiglu=true\nffn_hidden_size=1408\ngroup_query_attention=true\n"
     "num_query_groups=2\nuntie_embeddings_and_output_weights=true\nadd_bias_linear=false\n"},
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  int threads = 1, steps = 6, repeats = 3;
  bool help = false;
  std::string json_path = "train_throughput.json", only, precision = "fp32";
  po::options_description options("Options");
  options.add_options()("help,h", po::bool_switch(&help), "print this help and exit")(
      "threads", po::value(&threads)->default_value(threads), "BLAS threads")(
      "steps", po::value(&steps)->default_value(steps), "timed steps per repeat")(
      "repeats", po::value(&repeats)->default_value(repeats), "repeats")(
      "json", po::value(&json_path)->default_value(json_path), "JSON output file")(
      "only", po::value(&only), "run one configuration (L6-d384-V256, L12-d768-V50304 or llama-L8-d512-V32000)")(
      "precision", po::value(&precision)->default_value(precision), "fp32 or bf16 (host bf16: storage only, fp32 arithmetic)");
  parse_command_line_options(argc, argv, 1, options, {}, "train_throughput");
  if (help) {
    std::cout << "usage: train_throughput [--threads N] [--steps N] [--repeats N] [--json FILE] [--only NAME] [--precision P]\n"
              << options;
    return 0;
  }
  if (threads < 1 || steps < 1 || repeats < 1) throw UserError("train_throughput: --threads, --steps and --repeats must be >= 1");
  kernels::HostRuntime host_kernels;
  std::string warning;
  threads = configure_blas_threads(threads, cores_available(), cores_available(), 1, warning);
  if (!warning.empty()) std::printf("warning: %s\n", warning.c_str());
  std::vector<int> cpus = affinity_cpus();
  cpus.resize(std::min(cpus.size(), static_cast<std::size_t>(threads)));
  const double ceiling = sgemm_peak_gflops(cpus, threads, 1.0);
  std::printf("sgemm ceiling (%d core(s), best calls over 1 s): %.1f GFLOP/s\n", threads, ceiling);
  std::printf("FLOPs/token = 6 x matmul parameters + 6 x layers x T x d (causal attention: half of 12 x L x T x d)\n");
  std::printf("%-18s %10s %12s %12s %10s %9s\n", "config", "tokens/s", "ms/step med", "ms/step min", "GFLOP/s", "of sgemm");

  std::FILE* json = std::fopen(json_path.c_str(), "w");
  if (!json) {
    std::fprintf(stderr, "train_throughput: cannot write %s\n", json_path.c_str());
    return 1;
  }
  std::fprintf(json, "{\"threads\": %d, \"precision\": \"%s\", \"sgemm_gflops\": %.2f, \"configs\": [", threads, precision.c_str(),
               ceiling);
  bool first = true;
  for (const auto& bc : kConfigs) {
    if (!only.empty() && only != bc.name) continue;
    char ini[1024];
    std::snprintf(ini, sizeof ini,
                  "[model]\nnum_layers=%d\nhidden_size=%d\nnum_attention_heads=%d\nseq_length=%d\nvocab_size=%d\n"
                  "global_batch_size=%d\nmicro_batch_size=%d\n%s[system]\nprecision=%s\n",
                  bc.layers, bc.hidden, bc.heads, bc.seq, bc.vocab, bc.batch, bc.batch, bc.extra, precision.c_str());
    const Config cfg = load_config(ini, bc.name, {});
    const std::unique_ptr<GptModel> owned = make_gpt_model(whole_model_plan(cfg, bc.batch), nullptr, kernels::Backend::host);
    GptModel& model = *owned;
    std::vector<float> initial(model.plan().arena_size);
    init_parameters(model.table(), 1, initial.data());
    model.set_parameters(initial.data());
    AdamW adamw(model.plan(), cfg.optimizer, kernels::Backend::host);
    adamw.set_master(initial.data());
    std::mt19937 gen(1);
    std::uniform_int_distribution<int> tok(0, bc.vocab - 1);
    std::vector<int> inputs(static_cast<std::size_t>(model.dims().N())), targets(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i] = tok(gen), targets[i] = tok(gen);
    const MicroBatch batch{inputs.data(), targets.data()};
    const double tokens = static_cast<double>(bc.batch) * bc.seq;
    auto one_step = [&](int t) {
      model.grads().zero();
      model.forward(0, 0, batch);
      model.backward(0, 0, batch, static_cast<float>(1.0 / tokens), nullptr, nullptr);
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

}  // namespace

int main(int argc, char** argv) { return run_tool("train_throughput", argc, argv, run); }
