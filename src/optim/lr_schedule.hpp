// Learning-rate schedule: linear warmup from lr/warmup to lr over warmup_iters steps, then cosine decay
// to min_lr at the last step. `step` is 0-based.
#pragma once
#include <algorithm>
#include <cmath>

#include "config/config.hpp"

namespace dtrain {

inline double learning_rate(const OptimizerConfig& o, int step, int train_iters) {
  if (step < o.warmup_iters) return o.lr * (step + 1) / o.warmup_iters;
  const int decay_steps = std::max(1, train_iters - o.warmup_iters);
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_iters) / decay_steps);
  return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(3.14159265358979323846 * progress));
}

}  // namespace dtrain
