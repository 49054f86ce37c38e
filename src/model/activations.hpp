// The activation arena of a rank: one allocation of the device's memory carved by the plan's
// activation layout into slots (one micro-batch of one model chunk in flight each) and shared scratch
// buffers, of the run's storage type T.
#pragma once
#include <vector>

#include "plan/activation_layout.hpp"
#include "runtime/arena.hpp"

namespace dtrain {

template <typename T>
class Activations {
 public:
  Activations(const ActivationLayout& layout, Device& device) : layout_(layout), arena_(device, layout.bytes()) {
    carve_activations<T>(arena_.data(), layout_, slots_, scratch_);
  }
  SlotActs<T>& slot(int i) { return slots_[static_cast<std::size_t>(i)]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  Scratch<T>& scratch() { return scratch_; }
  const ActivationDims& dims() const { return layout_.dims; }
  const ActivationLayout& layout() const { return layout_; }

 private:
  ActivationLayout layout_;
  Arena arena_;
  std::vector<SlotActs<T>> slots_;
  Scratch<T> scratch_{};
};

}  // namespace dtrain
