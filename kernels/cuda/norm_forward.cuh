// The forward of a row normalisation over rows of at most kFusedColumns, shared by LayerNorm (kCentered:
// out = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(biased variance + eps), two passes over the
// registers) and RMSNorm (out = x * rstd * weight, rstd = 1/sqrt(mean(x^2) + eps)), optionally with the
// residual add before it (kResidual: x = inp1 + inp2 rounded to KT and written to res, as
// residual_forward writes it, so that res, out and the statistics equal those of the two kernels bit for
// bit; res may be inp1). A warp per row; the row is read once, in 16-byte packs, into registers (kPacks
// packs a lane, zeros past C: load_pack).
#pragma once
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_backward.cuh"

namespace dtrain::kernels::cuda {

constexpr int kNormForwardWarps = 8;

template <typename KT, bool kVector, bool kCentered, bool kResidual, int kPacks>
__global__ void __launch_bounds__(32 * kNormForwardWarps)
    norm_forward_packs_kernel(KT* res /*(N,C), kResidual*/, KT* __restrict__ out /*(N,C)*/, float* __restrict__ mean /*(N), kCentered*/,
                              float* __restrict__ rstd /*(N)*/, const KT* inp1 /*(N,C)*/, const KT* inp2 /*(N,C), kResidual*/,
                              const KT* __restrict__ weight /*(C)*/, const KT* __restrict__ bias /*(C), kCentered*/, long N, int C,
                              float eps) {
  constexpr int P = kPack<KT>;
  const long row = static_cast<long>(blockIdx.x) * kNormForwardWarps + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const long base = row * C;
  float xv[kPacks][P];
  float s = 0.0f;  // the sum (LayerNorm) or the sum of squares (RMSNorm)
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int i = (j * 32 + lane) * P;
    load_pack<kVector>(xv[j], inp1 + base, i, C);
    if constexpr (kResidual) {
      float yv[P];
      load_pack<kVector>(yv, inp2 + base, i, C);
#pragma unroll
      for (int k = 0; k < P; ++k) xv[j][k] = ld(st<KT>(xv[j][k] + yv[k]));  // the stored sum, as the norm reads it back
      if (i < C) store_n<kVector>(res + base, xv[j], i, C);
    }
#pragma unroll
    for (int k = 0; k < P; ++k) s += kCentered ? xv[j][k] : xv[j][k] * xv[j][k];
  }
  float m = 0.0f, r;
  if constexpr (kCentered) {
    m = warp_sum(s) / C;
    float v = 0.0f;
#pragma unroll
    for (int j = 0; j < kPacks; ++j)
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const float d = (j * 32 + lane) * P + k < C ? xv[j][k] - m : 0.0f;
        v += d * d;
      }
    r = rsqrtf(warp_sum(v) / C + eps);
  } else {
    r = rsqrtf(warp_sum(s) / C + eps);
  }
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int i = (j * 32 + lane) * P;
    if (i >= C) break;  // this lane's later packs are past the row too
    float wv[P], bv[P];
    load_n<kVector>(wv, weight, i, C);
    if constexpr (kCentered) load_n<kVector>(bv, bias, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) xv[j][k] = kCentered ? (xv[j][k] - m) * r * wv[k] + bv[k] : xv[j][k] * r * wv[k];
    store_n<kVector>(out + base, xv[j], i, C);
  }
  if (lane == 0) {
    if constexpr (kCentered) mean[row] = m;
    rstd[row] = r;
  }
}

// Launches norm_forward_packs_kernel (kResidual when inp2 is given) and returns true when C <=
// kFusedColumns; false, launching nothing, for wider rows. The caller checks the launch.
template <bool kCentered, typename KT>
bool launch_norm_forward_packs(KT* res, KT* out, float* mean, float* rstd, const KT* inp1, const KT* inp2, const KT* weight, const KT* bias,
                               long N, int C, float eps) {
  constexpr int P = kPack<KT>;
  if (C > kFusedColumns || N <= 0) return false;
  const dim3 grid(blocks_for(N, kNormForwardWarps)), block(32, kNormForwardWarps);
  const bool vector = packs_fit<KT>(C, res, out, inp1, inp2, weight, bias);
  auto launch = [&](auto packs_c) {
    constexpr int kP = decltype(packs_c)::value;
    if constexpr (kP * 32 * P > kFusedColumns) return;  // wider than any row this path takes
    else if (inp2 && vector)
      norm_forward_packs_kernel<KT, true, kCentered, true, kP><<<grid, block>>>(res, out, mean, rstd, inp1, inp2, weight, bias, N, C, eps);
    else if (inp2)
      norm_forward_packs_kernel<KT, false, kCentered, true, kP><<<grid, block>>>(res, out, mean, rstd, inp1, inp2, weight, bias, N, C, eps);
    else if (vector)
      norm_forward_packs_kernel<KT, true, kCentered, false, kP><<<grid, block>>>(res, out, mean, rstd, inp1, inp2, weight, bias, N, C, eps);
    else
      norm_forward_packs_kernel<KT, false, kCentered, false, kP><<<grid, block>>>(res, out, mean, rstd, inp1, inp2, weight, bias, N, C, eps);
  };
  with_lane_packs((C + 32 * P - 1) / (32 * P), launch);
  return true;
}

}  // namespace dtrain::kernels::cuda
