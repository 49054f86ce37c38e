// Loss scaling of fp16 runs, as Megatron's DynamicGradScaler and ConstantGradScaler. fp16 holds
// magnitudes from 2^-24 to 65504: small activation gradients would flush to zero, so the backward pass
// starts from loss x scale and the fp32 parameter gradients are divided by the scale before clipping
// and the update. A step whose gradients hold an inf or NaN (the scale was too large for some value)
// is skipped: no update, its batch consumed. Dynamic scaling (optimizer.loss_scale = 0): an overflow
// resets the growth count and uses up one unit of hysteresis; with none left the scale halves (not
// below min_loss_scale). loss_scale_window overflow-free steps in a row double the scale and restore
// the hysteresis. A fixed scale never changes. Every rank sees the same overflow flag (from the global
// gradient norm), so every rank's scaler holds the same state; checkpoints carry it.
#pragma once
#include <string>

#include "config/config.hpp"

namespace dtrain {

struct LossScalerState {
  double scale = 1.0;
  int growth_tracker = 0;      // overflow-free steps since the last overflow or growth
  int hysteresis_tracker = 1;  // overflows still allowed before the scale halves (<= 0: every overflow halves)
};

class LossScaler {
 public:
  explicit LossScaler(const OptimizerConfig& cfg);
  double scale() const { return state_.scale; }
  // Dynamic scaling already at optimizer.min_loss_scale: a lower scale cannot cure an overflow, so a
  // non-finite gradient there is a non-finite step (stop or rollback), not a skip.
  bool at_floor() const { return dynamic_ && state_.scale <= min_scale_; }
  // After a step: found_inf says whether any gradient was not finite (the step is skipped then).
  void update(bool found_inf);
  const LossScalerState& state() const { return state_; }
  // A saved state (a checkpoint's); UserError naming `source` when it cannot be one (scale not a finite
  // number > 0, a negative growth count).
  void restore(const LossScalerState& s, const std::string& source);

 private:
  bool dynamic_;
  double min_scale_;
  int window_, hysteresis_;
  LossScalerState state_;
};

}  // namespace dtrain
