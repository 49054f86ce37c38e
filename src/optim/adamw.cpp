// AdamW::step: the adamw_update kernel on every (owned range x tensor) intersection.
#include "optim/adamw.hpp"

#include <algorithm>

namespace dtrain {

std::size_t total_elements(const std::vector<ArenaRange>& ranges) {
  std::size_t n = 0;
  for (const auto& r : ranges) n += r.end - r.begin;
  return n;
}

AdamW::AdamW(const TensorTable& table, const OptimizerConfig& cfg, const kernels::KernelTable& k, std::vector<ArenaRange> owned)
    : table_(table), cfg_(cfg), k_(k), owned_(std::move(owned)), m_(total_elements(owned_)), v_(total_elements(owned_)) {}

void AdamW::step(Arena& params, const Arena& grads, double lr, int t) {
  std::size_t moment = 0;  // offset of the current range's moments
  for (const auto& r : owned_) {
    for (const auto& ts : table_.tensors()) {
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
