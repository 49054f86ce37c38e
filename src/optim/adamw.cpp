// AdamW::step: the adamw_update kernel per tensor, with or without weight decay.
#include "optim/adamw.hpp"

namespace dtrain {

AdamW::AdamW(const TensorTable& table, const OptimizerConfig& cfg, const kernels::KernelTable& k)
    : table_(table), cfg_(cfg), k_(k), m_(table.total()), v_(table.total()) {}

void AdamW::step(Arena& params, const Arena& grads, double lr, int t) {
  for (const auto& ts : table_.tensors()) {
    const std::size_t o = ts.offset;
    k_.adamw_update(params.data() + o, m_.data() + o, v_.data() + o, grads.data() + o, static_cast<long>(ts.numel),
                    static_cast<float>(lr), static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2),
                    static_cast<float>(cfg_.eps), ts.weight_decay ? static_cast<float>(cfg_.weight_decay) : 0.0f, t);
  }
}

}  // namespace dtrain
