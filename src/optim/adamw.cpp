// AdamW::step: the adamw_update kernel on every (owned range x tensor) intersection.
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
      v_(device_for(backend), plan.optimizer_elements() * sizeof(float)) {}

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
  std::size_t packed = 0;  // offset of the current range in the moments (and master weights)
  for (const auto& r : plan_.optimizer_ranges) {
    for (const auto& ts : plan_.table.tensors()) {
      const std::size_t lo = std::max(r.begin, ts.offset), hi = std::min(r.end, ts.offset + ts.numel);
      if (lo >= hi) continue;
      const std::size_t mo = packed + (lo - r.begin);
      const long n = static_cast<long>(hi - lo);
      const float decay = ts.weight_decay ? static_cast<float>(cfg_.weight_decay) : 0.0f;
      float* m = m_.as<float>() + mo;
      float* v = v_.as<float>() + mo;
      const float* g = grads.as<float>() + lo;
      if (has_master())
        k16.adamw_update(master_.as<float>() + mo, params.as<bf16>() + lo, m, v, g, n, static_cast<float>(lr),
                         static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps), decay, t);
      else
        k32.adamw_update(params.as<float>() + lo, nullptr, m, v, g, n, static_cast<float>(lr), static_cast<float>(cfg_.beta1),
                         static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps), decay, t);
    }
    packed += r.end - r.begin;
  }
}

}  // namespace dtrain
