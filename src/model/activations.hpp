// The activation arena of a rank: one allocation carved by the plan's activation layout into slots
// (one micro-batch of one model chunk in flight each) and shared scratch buffers.
#pragma once
#include <vector>

#include "plan/activation_layout.hpp"
#include "runtime/arena.hpp"

namespace dtrain {

class Activations {
 public:
  explicit Activations(const ActivationLayout& layout);
  SlotActs& slot(int i) { return slots_[static_cast<std::size_t>(i)]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  Scratch& scratch() { return scratch_; }
  const ActivationDims& dims() const { return layout_.dims; }

 private:
  ActivationLayout layout_;
  Arena arena_;
  std::vector<SlotActs> slots_;
  Scratch scratch_{};
};

}  // namespace dtrain
