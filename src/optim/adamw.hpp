// AdamW over a rank's parameter arena: first/second moments in their own arenas, weight decay only on
// tensors marked for it (not biases or LayerNorm), one kernel call per tensor.
#pragma once
#include "config/config.hpp"
#include "kernels/kernels.hpp"
#include "model/arena.hpp"
#include "model/tensor_table.hpp"

namespace dtrain {

class AdamW {
 public:
  AdamW(const TensorTable& table, const OptimizerConfig& cfg, const kernels::KernelTable& k);
  // One update with learning rate lr; t is the 1-based step count (bias correction).
  void step(Arena& params, const Arena& grads, double lr, int t);
  Arena& first_moment() { return m_; }
  Arena& second_moment() { return v_; }

 private:
  const TensorTable& table_;
  OptimizerConfig cfg_;
  const kernels::KernelTable& k_;
  Arena m_, v_;
};

}  // namespace dtrain
