// AdamW: the runs of every optimizer range (one per tensor it overlaps), and step: one adamw_update
// launch per range.
#include "optim/adamw.hpp"

#include <algorithm>

#include "kernels/kernels.hpp"

namespace dtrain {

AdamW::AdamW(const RankPlan& plan, const OptimizerConfig& cfg, kernels::Backend backend)
    : plan_(plan),
      cfg_(cfg),
      backend_(plan.offload_optimizer ? kernels::Backend::host : backend),
      master_(plan.precision == Precision::bf16 ? Arena(device_for(backend_), plan.optimizer_elements() * sizeof(float)) : Arena()),
      m_(device_for(backend_), plan.optimizer_elements() * sizeof(float)),
      v_(device_for(backend_), plan.optimizer_elements() * sizeof(float)),
      grads_staged_(plan.offload_optimizer ? PinnedBuffer(device_for(backend), plan.optimizer_elements() * sizeof(float)) : PinnedBuffer()),
      params_staged_(plan.offload_optimizer ? PinnedBuffer(device_for(backend), plan.optimizer_elements() * plan.compute_type_bytes())
                                            : PinnedBuffer()) {
  std::vector<kernels::AdamRun> runs;
  std::size_t packed = 0;  // offset of the current range in the moments (and master weights)
  for (const auto& r : plan_.optimizer_ranges) {
    RangeRuns rr{r.begin, r.end - r.begin, packed, runs.size(), 0, 0};
    for (const auto& ts : plan_.table.tensors()) {
      const std::size_t lo = std::max(r.begin, ts.offset), hi = std::min(r.end, ts.offset + ts.numel);
      if (lo >= hi) continue;
      const float decay = ts.weight_decay ? static_cast<float>(cfg_.weight_decay) : 0.0f;
      runs.push_back({static_cast<long>(lo - r.begin), static_cast<long>(hi - lo), rr.elements, decay});
      rr.elements += static_cast<long>(hi - lo);
      ++rr.count;
    }
    ranges_.push_back(rr);
    packed += r.end - r.begin;
  }
  runs_ = Arena(device_for(backend_), runs.size() * sizeof(kernels::AdamRun));
  if (!runs.empty()) runs_.device().copy(runs_.data(), runs.data(), runs.size() * sizeof(kernels::AdamRun));
}

void AdamW::set_master(ArenaRange from, const float* values) {
  if (!has_master()) return;
  std::size_t packed = 0;
  for (const auto& r : plan_.optimizer_ranges) {
    const std::size_t lo = std::max(r.begin, from.begin), hi = std::min(r.end, from.end);
    if (lo < hi) master_.device().copy(master_.as<float>() + packed + (lo - r.begin), values + (lo - from.begin), sizeof(float) * (hi - lo));
    packed += r.end - r.begin;
  }
}

void AdamW::step(Arena& params, const Arena& grads, double lr, int t) {
  const auto& k32 = kernels::kernel_table<float>(backend_);
  const auto& k16 = kernels::kernel_table<bf16>(backend_);
  const auto f = [](double x) { return static_cast<float>(x); };
  const std::size_t e = plan_.compute_type_bytes();
  Device& device = params.device();
  for (const RangeRuns& r : ranges_) {
    const kernels::AdamRun* runs = runs_.as<kernels::AdamRun>() + r.first_run;
    float* m = m_.as<float>() + r.packed;
    float* v = v_.as<float>() + r.packed;
    // The range's gradients and weights where the update runs: in place, or the host's staged copies
    // (the weights too: an fp32 run's are its master weights, and a range's gaps must come back unchanged).
    const float* g = grads.as<float>() + r.begin;
    char* p = params.as<char>() + r.begin * e;
    if (offloaded()) {
      float* g_host = grads_staged_.as<float>() + r.packed;
      char* p_host = params_staged_.as<char>() + r.packed * e;
      device.copy(g_host, g, r.length * sizeof(float));
      device.copy(p_host, p, r.length * e);
      g = g_host, p = p_host;
    }
    if (has_master())
      k16.adamw_update(master_.as<float>() + r.packed, reinterpret_cast<bf16*>(p), m, v, g, runs, r.count, r.elements, f(lr),
                       f(cfg_.beta1), f(cfg_.beta2), f(cfg_.eps), t);
    else
      k32.adamw_update(reinterpret_cast<float*>(p), nullptr, m, v, g, runs, r.count, r.elements, f(lr), f(cfg_.beta1),
                       f(cfg_.beta2), f(cfg_.eps), t);
    if (offloaded()) device.copy(params.as<char>() + r.begin * e, p, r.length * e);
  }
}

}  // namespace dtrain
