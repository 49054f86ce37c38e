// AdamW over ranges of a rank's parameter arena: the whole arena, or (distributed optimizer) this
// rank's slices. First and second moments are stored only for those ranges, back to back. Weight
// decay applies only to tensors marked for it (not biases or LayerNorm).
#pragma once
#include <vector>

#include "config/config.hpp"
#include "kernels/kernels.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/arena.hpp"

namespace dtrain {

class AdamW {
 public:
  // Moments for the plan's optimizer ranges.
  AdamW(const RankPlan& plan, const OptimizerConfig& cfg, const kernels::KernelTable& k);
  // One update of the owned ranges with learning rate lr; t is the 1-based step count.
  void step(Arena& params, const Arena& grads, double lr, int t);
  Arena& first_moment() { return m_; }
  Arena& second_moment() { return v_; }

 private:
  const RankPlan& plan_;
  OptimizerConfig cfg_;
  const kernels::KernelTable& k_;
  Arena m_, v_;
};

}  // namespace dtrain
