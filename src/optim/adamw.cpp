// AdamW::step: the adamw_update kernel on every (owned range x tensor) intersection.
#include "optim/adamw.hpp"

#include <algorithm>

namespace dtrain {

AdamW::AdamW(const RankPlan& plan, const OptimizerConfig& cfg, const kernels::KernelTable& k)
    : plan_(plan), cfg_(cfg), k_(k), m_(plan.optimizer_elements()), v_(plan.optimizer_elements()) {}

void AdamW::step(Arena& params, const Arena& grads, double lr, int t) {
  std::size_t moment = 0;  // offset of the current range's moments
  for (const auto& r : plan_.optimizer_ranges) {
    for (const auto& ts : plan_.table.tensors()) {
      const std::size_t lo = std::max(r.begin, ts.offset), hi = std::min(r.end, ts.offset + ts.numel);
      if (lo >= hi) continue;
      const std::size_t mo = moment + (lo - r.begin);
      k_.adamw_update(params.data() + lo, m_.data() + mo, v_.data() + mo, grads.data() + lo, static_cast<long>(hi - lo),
                      static_cast<float>(lr), static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2),
                      static_cast<float>(cfg_.eps), ts.weight_decay ? static_cast<float>(cfg_.weight_decay) : 0.0f, t);
    }
    moment += r.end - r.begin;
  }
}

}  // namespace dtrain
