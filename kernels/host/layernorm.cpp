// Host backend: layer normalisation over the last dim (layernorm_forward, layernorm_backward).
// Biased variance (divide by C), two-pass mean/variance per row.
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cmath>

namespace dtrain::kernels::host {

void layernorm_forward(float* out /*(N,C)*/, float* mean /*(N)*/, float* rstd /*(N)*/, const float* inp /*(N,C)*/,
                       const float* weight /*(C)*/, const float* bias /*(C)*/, long N, int C, float eps) {
  const float inv_c = 1.0f / static_cast<float>(C);
  Kokkos::parallel_for(
      "layernorm_forward", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        const float* __restrict__ x = inp + i * C;   // (C)
        float* __restrict__ o = out + i * C;         // (C)
        const float m = lane_sum(x, C) * inv_c;
        // Variance: sum of squared deviations, kLanes split accumulators (fixed order).
        float acc[kLanes] = {};
        int c = 0;
        for (; c + kLanes <= C; c += kLanes)
          for (int l = 0; l < kLanes; ++l) {
            const float d = x[c + l] - m;
            acc[l] += d * d;
          }
        for (int l = 0; c < C; ++c, ++l) {
          const float d = x[c] - m;
          acc[l] += d * d;
        }
        float var = 0.0f;
        for (int l = 0; l < kLanes; ++l) var += acc[l];
        var *= inv_c;
        const float s = 1.0f / std::sqrt(var + eps);
        for (int k = 0; k < C; ++k) o[k] = (x[k] - m) * s * weight[k] + bias[k];
        mean[i] = m;
        rstd[i] = s;
      });
}

void layernorm_backward(float* dinp /*(N,C)*/, float* dweight /*(C)*/, float* dbias /*(C)*/,
                        const float* dout /*(N,C)*/, const float* inp /*(N,C)*/, const float* weight /*(C)*/,
                        const float* mean /*(N)*/, const float* rstd /*(N)*/, long N, int C) {
  const float inv_c = 1.0f / static_cast<float>(C);
  // dinp: rows are independent.
  //   xhat = (x - mean) * rstd, g = weight * dout,
  //   dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)).
  Kokkos::parallel_for(
      "layernorm_backward", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        const float* __restrict__ x = inp + i * C;    // (C)
        const float* __restrict__ dy = dout + i * C;  // (C)
        float* __restrict__ dx = dinp + i * C;        // (C)
        const float m = mean[i];
        const float s = rstd[i];
        float acc_g[kLanes] = {};
        float acc_gx[kLanes] = {};
        int c = 0;
        for (; c + kLanes <= C; c += kLanes)
          for (int l = 0; l < kLanes; ++l) {
            const float g = weight[c + l] * dy[c + l];
            acc_g[l] += g;
            acc_gx[l] += g * ((x[c + l] - m) * s);
          }
        for (int l = 0; c < C; ++c, ++l) {
          const float g = weight[c] * dy[c];
          acc_g[l] += g;
          acc_gx[l] += g * ((x[c] - m) * s);
        }
        float sum_g = 0.0f, sum_gx = 0.0f;
        for (int l = 0; l < kLanes; ++l) {
          sum_g += acc_g[l];
          sum_gx += acc_gx[l];
        }
        const float mean_g = sum_g * inv_c;
        const float mean_gx = sum_gx * inv_c;
        for (int k = 0; k < C; ++k) {
          const float xhat = (x[k] - m) * s;
          dx[k] += s * (weight[k] * dy[k] - mean_g - xhat * mean_gx);
        }
      });
  // dweight, dbias: a sum over rows into one (C) vector. A plain row-ordered loop keeps it race-free and
  // bit-reproducible whatever the execution space (the row pass above cannot own these without atomics).
  float* __restrict__ dw = dweight;   // (C)
  float* __restrict__ db = dbias;     // (C)
  for (long i = 0; i < N; ++i) {
    const float* __restrict__ x = inp + i * C;    // (C)
    const float* __restrict__ dy = dout + i * C;  // (C)
    const float m = mean[i];
    const float s = rstd[i];
    for (int k = 0; k < C; ++k) {
      db[k] += dy[k];
      dw[k] += dy[k] * ((x[k] - m) * s);
    }
  }
}

}  // namespace dtrain::kernels::host
