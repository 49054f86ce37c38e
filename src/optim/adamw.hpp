// AdamW over ranges of a rank's parameter arena: the whole arena, or (distributed optimizer) this
// rank's slices. First and second moments are stored only for those ranges, back to back. Weight
// decay applies only to tensors marked for it (not biases or LayerNorm).
#pragma once
#include <vector>

#include "config/config.hpp"
#include "kernels/kernels.hpp"
#include "model/arena.hpp"
#include "model/tensor_table.hpp"

namespace dtrain {

class AdamW {
 public:
  AdamW(const TensorTable& table, const OptimizerConfig& cfg, const kernels::KernelTable& k, std::vector<ArenaRange> owned);
  // One update of the owned ranges with learning rate lr; t is the 1-based step count.
  void step(Arena& params, const Arena& grads, double lr, int t);
  const std::vector<ArenaRange>& owned() const { return owned_; }
  Arena& first_moment() { return m_; }
  Arena& second_moment() { return v_; }

 private:
  const TensorTable& table_;
  OptimizerConfig cfg_;
  const kernels::KernelTable& k_;
  std::vector<ArenaRange> owned_;
  Arena m_, v_;
};

std::size_t total_elements(const std::vector<ArenaRange>& ranges);

}  // namespace dtrain
