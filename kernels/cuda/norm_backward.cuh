// The input gradient of a row normalisation, shared by LayerNorm (kCentered: xhat = (x - mean) * rstd)
// and RMSNorm (xhat = x * rstd): dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight *
// dout, without the mean(g) term for RMSNorm. A warp per row; each lane walks its 16-byte packs of the
// row (element by element where the row or the pointers do not fit packs); the pointers do not alias,
// so the loads of later packs are issued before the stores of earlier ones.
#pragma once
#include "kernels/cuda/device_math.cuh"

namespace dtrain::kernels::cuda {

constexpr int kNormBackwardWarps = 8;

template <typename KT, bool kVector, bool kCentered>
__global__ void __launch_bounds__(32 * kNormBackwardWarps)
    norm_backward_kernel(KT* __restrict__ dinp, const KT* __restrict__ dout, const KT* __restrict__ inp, const KT* __restrict__ weight,
                         const float* __restrict__ mean /*(N) or null*/, const float* __restrict__ rstd, long N, int C) {
  constexpr int P = kPack<KT>;
  const long row = static_cast<long>(blockIdx.x) * kNormBackwardWarps + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  const KT* dy = dout + row * C;
  const float m = kCentered ? mean[row] : 0.0f, r = rstd[row];
  float sg = 0.0f, sgx = 0.0f;
#pragma unroll 4
  for (int i = lane * P; i < C; i += 32 * P) {
    float xv[P], dyv[P], wv[P];
    load_n<kVector>(xv, x, i, C);
    load_n<kVector>(dyv, dy, i, C);
    load_n<kVector>(wv, weight, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float g = wv[k] * dyv[k];
      if constexpr (kCentered) sg += g;
      sgx += g * ((xv[k] - m) * r);
    }
  }
  const float mean_g = kCentered ? warp_sum(sg) / C : 0.0f, mean_gx = warp_sum(sgx) / C;
  KT* dx = dinp + row * C;
#pragma unroll 4
  for (int i = lane * P; i < C; i += 32 * P) {
    float xv[P], dyv[P], wv[P], dxv[P];
    load_n<kVector>(xv, x, i, C);
    load_n<kVector>(dyv, dy, i, C);
    load_n<kVector>(wv, weight, i, C);
    load_n<kVector>(dxv, dx, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) dxv[k] += r * (wv[k] * dyv[k] - mean_g - (xv[k] - m) * r * mean_gx);
    store_n<kVector>(dx, dxv, i, C);
  }
}

// Launches the kernel (the caller checks the launch, under its own name).
template <bool kCentered, typename KT>
void launch_norm_backward(KT* dinp, const KT* dout, const KT* inp, const KT* weight, const float* mean, const float* rstd, long N,
                          int C) {
  const dim3 grid(blocks_for(N, kNormBackwardWarps)), block(32, kNormBackwardWarps);
  if (packs_fit<KT>(C, dinp, dout, inp, weight))
    norm_backward_kernel<KT, true, kCentered><<<grid, block>>>(dinp, dout, inp, weight, mean, rstd, N, C);
  else
    norm_backward_kernel<KT, false, kCentered><<<grid, block>>>(dinp, dout, inp, weight, mean, rstd, N, C);
}

}  // namespace dtrain::kernels::cuda
