// AdamW: the runs of every optimizer range (one per tensor it overlaps), and step: one adamw_update
// launch per range.
#include "optim/adamw.hpp"

#include <algorithm>

#include "kernels/kernels.hpp"

namespace dtrain {

AdamW::AdamW(const RankPlan& plan, const OptimizerConfig& cfg, kernels::Backend backend)
    : plan_(plan),
      cfg_(cfg),
      backend_(backend),
      master_(plan.precision == Precision::bf16 ? Arena(device_for(backend), plan.optimizer_elements() * sizeof(float)) : Arena()),
      m_(device_for(backend), plan.optimizer_elements() * sizeof(float)),
      v_(device_for(backend), plan.optimizer_elements() * sizeof(float)) {
  std::vector<kernels::AdamRun> runs;
  std::size_t packed = 0;  // offset of the current range in the moments (and master weights)
  for (const auto& r : plan_.optimizer_ranges) {
    RangeRuns rr{r.begin, packed, runs.size(), 0, 0};
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
  runs_ = Arena(device_for(backend), runs.size() * sizeof(kernels::AdamRun));
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
  for (const RangeRuns& r : ranges_) {
    const kernels::AdamRun* runs = runs_.as<kernels::AdamRun>() + r.first_run;
    float* m = m_.as<float>() + r.packed;
    float* v = v_.as<float>() + r.packed;
    const float* g = grads.as<float>() + r.begin;
    if (has_master())
      k16.adamw_update(master_.as<float>() + r.packed, params.as<bf16>() + r.begin, m, v, g, runs, r.count, r.elements, f(lr),
                       f(cfg_.beta1), f(cfg_.beta2), f(cfg_.eps), t);
    else
      k32.adamw_update(params.as<float>() + r.begin, nullptr, m, v, g, runs, r.count, r.elements, f(lr), f(cfg_.beta1),
                       f(cfg_.beta2), f(cfg_.eps), t);
  }
}

}  // namespace dtrain
