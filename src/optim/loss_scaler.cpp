// LossScaler: Megatron's update rule (megatron/core/optimizer/grad_scaler.py), growth factor 2 and
// backoff factor 1/2.
#include "optim/loss_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace dtrain {

LossScaler::LossScaler(const OptimizerConfig& cfg)
    : dynamic_(cfg.loss_scale == 0.0),
      min_scale_(cfg.min_loss_scale),
      window_(cfg.loss_scale_window),
      hysteresis_(cfg.hysteresis) {
  state_.scale = dynamic_ ? cfg.initial_loss_scale : cfg.loss_scale;
  state_.hysteresis_tracker = hysteresis_;
}

void LossScaler::update(bool found_inf) {
  if (!dynamic_) return;
  if (found_inf) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker -= 1;
    if (state_.hysteresis_tracker <= 0) state_.scale = std::max(state_.scale * 0.5, min_scale_);
    return;
  }
  if (++state_.growth_tracker == window_) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = hysteresis_;
    state_.scale *= 2.0;
  }
}

void LossScaler::restore(const LossScalerState& s, const std::string& source) {
  if (!(std::isfinite(s.scale) && s.scale > 0.0) || s.growth_tracker < 0)
    throw UserError(source + " holds a loss scaler state that cannot be one (scale " + std::to_string(s.scale) + ", growth " +
                    std::to_string(s.growth_tracker) + ", hysteresis " + std::to_string(s.hysteresis_tracker) +
                    "); start without it (checkpoint.load = none) or from another checkpoint");
  if (!dynamic_) return;  // a fixed scale is the configuration's, not the checkpoint's
  state_ = s;
  // A run resumed with a shorter window or less hysteresis: the trackers within the new bounds (the
  // hysteresis tracker goes below zero after its first halving; every further overflow halves again).
  state_.growth_tracker = std::min(state_.growth_tracker, window_ - 1);
  state_.hysteresis_tracker = std::min(state_.hysteresis_tracker, hysteresis_);
}

}  // namespace dtrain
