// attention_kernels: the CUDA backend's fused causal attention alone (kernels/cuda/attention_16bit.cu),
// forward and backward, on fixed shapes in bf16, timed on the GPU: milliseconds (min and median of the
// repeats) and TFLOP/s. tools/bench/torch_attention.py times PyTorch's flash attention on the same
// shapes, and tools/gpu-visit (stage attention) runs both and reports the ratio.
//   build/tools/bench/attention_kernels [--repeats 20] [--json FILE] [--only NAME]
// FLOPs (flash-attention's convention): forward 4 B NH T^2 HD / 2 (Q K^T and P V, the causal half), the
// backward 2.5 times that (Q K^T again, dO V^T, dV, dK, dQ). Exit 77 without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/cli.hpp"
#include "kernels/attention_scratch.hpp"
#include "kernels/kernels.hpp"
#include "runtime/arena.hpp"
#include "runtime/cuda_device.hpp"
#include "runtime/device.hpp"

using namespace dtrain;

namespace {

struct Shape {
  const char* name;
  int B, T, NH, NKV, HD;
};

// GPT-2 124M at micro-batch 16 (the visit's training run), a long sequence, Llama 3 8B's heads.
const Shape kShapes[] = {
    {"gpt2-mb16-T1024", 16, 1024, 12, 12, 64},
    {"gpt2-mb4-T4096", 4, 4096, 12, 12, 64},
    {"llama-gqa-T2048-hd128", 2, 2048, 32, 8, 128},
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds of each of `repeats` calls of f, after one warm-up call, each waited for.
template <typename F>
std::vector<double> time_ms(int repeats, F f) {
  f();
  cuda_device().synchronize();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    cuda_device().synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  int repeats = 20;
  bool help = false;
  std::string json_path = "attention_kernels.json", only;
  po::options_description options("Options");
  options.add_options()("help,h", po::bool_switch(&help), "print this help and exit")(
      "repeats", po::value(&repeats)->default_value(repeats), "timed calls of each kernel per shape")(
      "json", po::value(&json_path)->default_value(json_path), "JSON output file")(
      "only", po::value(&only), "run one shape (gpt2-mb16-T1024, gpt2-mb4-T4096, llama-gqa-T2048-hd128)");
  parse_command_line_options(argc, argv, 1, options, {}, "attention_kernels");
  if (help) {
    std::cout << "usage: attention_kernels [--repeats N] [--json FILE] [--only NAME]\n" << options;
    return 0;
  }
  if (repeats < 1) throw UserError("attention_kernels: --repeats must be at least 1");
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("attention_kernels: no GPU visible; nothing to time\n");
    return 77;
  }
  select_cuda_device(0, 1, "local", false);
  const auto& k = kernels::kernel_table<bf16>(kernels::Backend::cuda);
  std::mt19937 gen(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::printf("%-24s %10s %10s %9s %10s %10s %9s\n", "shape (bf16, causal)", "fwd ms min", "median", "TFLOP/s", "bwd ms min",
              "median", "TFLOP/s");
  std::vector<std::string> objects;  // one JSON object per shape
  for (const Shape& s : kShapes) {
    if (!only.empty() && only != s.name) continue;
    const long rows = static_cast<long>(s.B) * s.T, W = static_cast<long>(s.NH + 2 * s.NKV) * s.HD, C = static_cast<long>(s.NH) * s.HD;
    std::vector<bf16> host(rows * W);
    for (auto& x : host) x = from_float<bf16>(nd(gen));
    Arena qkv(cuda_device(), rows * W * sizeof(bf16)), dqkv(cuda_device(), rows * W * sizeof(bf16));
    Arena out(cuda_device(), rows * C * sizeof(bf16)), dout(cuda_device(), rows * C * sizeof(bf16));
    Arena lse(cuda_device(), static_cast<std::size_t>(s.B) * s.NH * s.T * sizeof(float));
    Arena scratch(cuda_device(), kernels::attention_scratch_floats(s.B, s.T, s.NH) * sizeof(float));
    cuda_device().copy(qkv.data(), host.data(), host.size() * sizeof(bf16));
    cuda_device().copy(dout.data(), host.data(), rows * C * sizeof(bf16));  // any values of the right size
    const auto fwd = time_ms(repeats, [&] {
      k.attention_forward(out.as<bf16>(), lse.as<float>(), scratch.as<float>(), qkv.as<bf16>(), kernels::KeyVisibility{}, s.B, s.T, s.NH,
                          s.NKV, s.HD);
    });
    const auto bwd = time_ms(repeats, [&] {
      k.attention_backward(dqkv.as<bf16>(), scratch.as<float>(), dout.as<bf16>(), out.as<bf16>(), lse.as<float>(), qkv.as<bf16>(),
                           kernels::KeyVisibility{}, s.B,
                           s.T, s.NH, s.NKV, s.HD);
    });
    const double fwd_flops = 4.0 * s.B * s.NH * static_cast<double>(s.T) * s.T * s.HD / 2, bwd_flops = 2.5 * fwd_flops;
    const double fmin = *std::min_element(fwd.begin(), fwd.end()), bmin = *std::min_element(bwd.begin(), bwd.end());
    std::printf("%-24s %10.3f %10.3f %9.1f %10.3f %10.3f %9.1f\n", s.name, fmin, median(fwd), fwd_flops / fmin / 1e9, bmin, median(bwd),
                bwd_flops / bmin / 1e9);
    char row[512];
    std::snprintf(row, sizeof row,
                  "{\"name\": \"%s\", \"B\": %d, \"T\": %d, \"NH\": %d, \"NKV\": %d, \"HD\": %d, \"forward_ms_min\": %.4f, "
                  "\"forward_ms_median\": %.4f, \"forward_tflops\": %.2f, \"backward_ms_min\": %.4f, \"backward_ms_median\": %.4f, "
                  "\"backward_tflops\": %.2f}",
                  s.name, s.B, s.T, s.NH, s.NKV, s.HD, fmin, median(fwd), fwd_flops / fmin / 1e9, bmin, median(bwd), bwd_flops / bmin / 1e9);
    objects.push_back(row);
  }
  std::ofstream json(json_path);
  json << "{\"precision\": \"bf16\", \"repeats\": " << repeats << ", \"shapes\": [";
  for (std::size_t i = 0; i < objects.size(); ++i) json << (i ? ",\n " : "\n ") << objects[i];
  json << "]}\n";
  if (!json) throw UserError("attention_kernels: cannot write " + json_path);
  std::cout << "wrote " << json_path << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run_tool("attention_kernels", argc, argv, run); }
