// Host backend: RMS normalisation over the last dim (rmsnorm_forward, rmsnorm_backward), Llama's norm:
// out = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cmath>

namespace dtrain::kernels::host {

void rmsnorm_forward(float* out /*(N,C)*/, float* rstd /*(N)*/, const float* inp /*(N,C)*/, const float* weight /*(C)*/, long N,
                     int C, float eps) {
  const float inv_c = 1.0f / static_cast<float>(C);
  Kokkos::parallel_for(
      "rmsnorm_forward", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        const float* __restrict__ x = inp + i * C;  // (C)
        float* __restrict__ o = out + i * C;        // (C)
        const float s = 1.0f / std::sqrt(lane_dot(x, x, C) * inv_c + eps);
        for (int k = 0; k < C; ++k) o[k] = x[k] * s * weight[k];
        rstd[i] = s;
      });
}

// With xhat = x * rstd and g = w * dout: dinp += rstd * (g - xhat * mean(g * xhat)); dweight += dout * xhat.
void rmsnorm_backward(float* dinp /*(N,C)*/, float* dweight /*(C)*/, const float* dout /*(N,C)*/, const float* inp /*(N,C)*/,
                      const float* weight /*(C)*/, const float* rstd /*(N)*/, long N, int C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  Kokkos::parallel_for(
      "rmsnorm_backward", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        const float* __restrict__ x = inp + i * C;    // (C)
        const float* __restrict__ dy = dout + i * C;  // (C)
        float* __restrict__ dx = dinp + i * C;        // (C)
        const float s = rstd[i];
        float acc[kLanes] = {};
        int c = 0;
        for (; c + kLanes <= C; c += kLanes)
          for (int l = 0; l < kLanes; ++l) acc[l] += weight[c + l] * dy[c + l] * x[c + l];
        for (int l = 0; c < C; ++c, ++l) acc[l] += weight[c] * dy[c] * x[c];
        float sum_gx = 0.0f;
        for (int l = 0; l < kLanes; ++l) sum_gx += acc[l];
        const float mean_gxhat = sum_gx * s * inv_c;
        for (int k = 0; k < C; ++k) dx[k] += s * (weight[k] * dy[k] - x[k] * s * mean_gxhat);
      });
  // dweight: a row-ordered loop, race-free and bit-reproducible (as layernorm_backward).
  float* __restrict__ dw = dweight;  // (C)
  for (long i = 0; i < N; ++i) {
    const float* __restrict__ x = inp + i * C;    // (C)
    const float* __restrict__ dy = dout + i * C;  // (C)
    const float s = rstd[i];
    for (int k = 0; k < C; ++k) dw[k] += dy[k] * x[k] * s;
  }
}

}  // namespace dtrain::kernels::host
