// AdamW's arithmetic for one element, shared by every backend (the host kernel, the CUDA kernel, and
// the offloaded update's host threads), so that they compute the same bits. The bias corrections are
// folded into two multipliers once per step, in double, then rounded (no pow or division per element).
#pragma once
#include <cmath>

#include "kernels/host_device.hpp"

namespace dtrain::kernels {

struct AdamStep {
  float lr, beta1, beta2, eps;
  float inv_bc1, inv_bc2;  // 1 / (1 - beta^t), rounded from double
};

inline AdamStep adam_step(float lr, float beta1, float beta2, float eps, int t) {
  return {lr, beta1, beta2, eps, static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta1), t))),
          static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta2), t)))};
}

// The factor an optimizer step takes its gradients by, from the step's summed token loss and squared
// gradient norm (each summed over the ranks; the gradients carry the loss scale, 1 outside fp16):
// 1 / loss_scale, times clip / (norm + 1e-6) when clip > 0 and the norm sqrt(squares) / loss_scale is
// above clip; NaN when the mean loss loss_sum / tokens or the norm is not finite, which skips the update
// (adamw_update). In double, rounded once: every backend, and the host deciding, get the same bits.
DTRAIN_HOST_DEVICE inline float step_grad_factor(double loss_sum, double squares, double tokens, double loss_scale, double clip) {
  const double loss = loss_sum / tokens, norm = std::sqrt(squares) / loss_scale;
  if (!std::isfinite(loss) || !std::isfinite(norm)) return NAN;
  double factor = 1.0 / loss_scale;
  if (clip > 0 && norm > clip) factor *= clip / (norm + 1e-6);
  return static_cast<float>(factor);
}

// Updates the moments m and v of one element with gradient g and returns its new weight from p.
DTRAIN_HOST_DEVICE inline float adamw_element(float p, float g, float& m, float& v, float weight_decay, const AdamStep& s) {
  const float mi = s.beta1 * m + (1.0f - s.beta1) * g;
  const float vi = s.beta2 * v + (1.0f - s.beta2) * g * g;
  m = mi;
  v = vi;
  return p - s.lr * ((mi * s.inv_bc1) / (sqrtf(vi * s.inv_bc2) + s.eps) + weight_decay * p);
}

}  // namespace dtrain::kernels
