// moe_block OUT_DIR [--model.key=value ...]: one MoE layer of dtrain (MoeLayer<float> on the host) on
// random inputs, forward and backward, its inputs and results written as raw float32 files into
// OUT_DIR for tests/e2e/moe_reference.py to recompute with PyTorch. The model is one block of width 16
// with 2 x 12 = 24 tokens (the overrides choose experts, top-k, width, capacity, loss, SwiGLU, biases).
// Random values: x, dy ~ N(0,1); router_w ~ N(0, 0.5) (decisive routing: no near-ties between
// choices); expert weights ~ N(0, 0.2), biases ~ N(0, 0.1). The backward pass weighs the LM loss per
// token by 1/N, so the load-balancing loss enters the objective with weight N x 1/N = 1:
// J = sum(dy * out) + aux.
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/load.hpp"
#include "kernels/host_runtime.hpp"
#include "model/activations.hpp"
#include "model/moe_layer.hpp"
#include "model/param_views.hpp"

namespace {

void write(const std::string& dir, const std::string& name, const float* v, std::size_t n) {
  const std::string path = dir + "/" + name + ".f32";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(v, sizeof(float), n, f) != n || std::fclose(f) != 0) throw dtrain::UserError("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dtrain;
  if (argc < 2) {
    std::cerr << "usage: moe_block OUT_DIR [--model.key=value ...]\n";
    return 2;
  }
  try {
    kernels::HostRuntime host_kernels;
    const Config cfg = load_config("[model]\nnum_layers=1\nhidden_size=16\nnum_attention_heads=2\nseq_length=12\nvocab_size=8\n"
                                   "global_batch_size=2\nmicro_batch_size=2\nnum_experts=4\n",
                                   "moe_block", std::vector<std::string>(argv + 2, argv + argc));
    const RankPlan plan = whole_model_plan(cfg, 2);
    const ActivationDims& d = plan.activations.dims;
    Device& host = device_for(kernels::Backend::host);
    std::vector<float> params(plan.arena_size), grads(plan.arena_size, 0.0f);
    std::mt19937 gen(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const std::string dir = argv[1];
    for (const auto& t : plan.table.tensors()) {
      const float scale = t.name.find("router") != std::string::npos ? 0.5f : t.name.find("_b") != std::string::npos ? 0.1f : 0.2f;
      for (std::size_t i = 0; i < t.numel; ++i) params[t.offset + i] = scale * nd(gen);
      if (t.name.find("expert") != std::string::npos || t.name.find("router") != std::string::npos)
        write(dir, t.name.substr(t.name.find('.') + 1), params.data() + t.offset, t.numel);
    }
    const std::size_t rows = static_cast<std::size_t>(d.N()) * static_cast<std::size_t>(d.C);
    std::vector<float> x(rows), dy(rows), out(rows), dx(rows);
    for (float& v : x) v = nd(gen);
    for (float& v : dy) v = nd(gen);
    const MoeParams<float> p = views(plan, params.data()).blocks[0].moe;
    const MoeParams<float> g = views(plan, grads.data()).blocks[0].moe;
    Activations<float> acts(plan.activations, host);
    MoeStats stats;
    LocalExpertDispatch dispatch;
    MoeLayer<float> layer(plan, kernels::Backend::host, nullptr, nullptr, dispatch, host, stats);
    MoeActs<float>& a = acts.slot(0).blocks[0].moe;
    layer.forward(out.data(), p, x.data(), d.N(), a, acts.scratch(), 0, true);
    layer.backward(dx.data(), p, g, x.data(), dy.data(), a, acts.scratch(), 1.0f / static_cast<float>(d.N()));
    write(dir, "x", x.data(), rows);
    write(dir, "dy", dy.data(), rows);
    write(dir, "out", out.data(), rows);
    write(dir, "dx", dx.data(), rows);
    for (const auto& t : plan.table.tensors())
      if (t.name.find("expert") != std::string::npos || t.name.find("router") != std::string::npos)
        write(dir, "grad_" + t.name.substr(t.name.find('.') + 1), grads.data() + t.offset, t.numel);
    const float aux = static_cast<float>(stats.aux_loss);
    write(dir, "aux", &aux, 1);
  } catch (const UserError& e) {
    std::cerr << "moe_block: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
