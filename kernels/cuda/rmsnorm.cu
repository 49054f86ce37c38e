// CUDA backend: RMS normalisation over the last dim (Llama's norm), a warp per row (the backward in
// 16-byte packs); the weight gradient is a deterministic block column sum.
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

template <typename KT>
__global__ void rmsnorm_forward_kernel(KT* out, float* rstd, const KT* inp, const KT* weight, long N, int C, float eps) {
  const long row = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) ss += ld(x[c]) * ld(x[c]);
  const float r = rsqrtf(warp_sum(ss) / C + eps);
  KT* o = out + row * C;
  for (int c = lane; c < C; c += 32) o[c] = st<KT>(ld(x[c]) * r * ld(weight[c]));
  if (lane == 0) rstd[row] = r;
}

// dinp += rstd * (g - xhat * mean(g * xhat)), g = weight * dout, xhat = x * rstd; in packs, as the
// LayerNorm backward (layernorm.cu).
template <typename KT, bool kVector>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    rmsnorm_backward_kernel(KT* __restrict__ dinp, const KT* __restrict__ dout, const KT* __restrict__ inp,
                            const KT* __restrict__ weight, const float* __restrict__ rstd, long N, int C) {
  constexpr int P = kPack<KT>;
  const long row = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  const KT* dy = dout + row * C;
  const float r = rstd[row];
  float sgx = 0.0f;
#pragma unroll 4
  for (int i = lane * P; i < C; i += 32 * P) {
    float xv[P], dyv[P], wv[P];
    load_n<kVector>(xv, x, i, C);
    load_n<kVector>(dyv, dy, i, C);
    load_n<kVector>(wv, weight, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) sgx += wv[k] * dyv[k] * xv[k] * r;
  }
  const float mean_gx = warp_sum(sgx) / C;
  KT* dx = dinp + row * C;
#pragma unroll 4
  for (int i = lane * P; i < C; i += 32 * P) {
    float xv[P], dyv[P], wv[P], dxv[P];
    load_n<kVector>(xv, x, i, C);
    load_n<kVector>(dyv, dy, i, C);
    load_n<kVector>(wv, weight, i, C);
    load_n<kVector>(dxv, dx, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) dxv[k] += r * (wv[k] * dyv[k] - xv[k] * r * mean_gx);
    store_n<kVector>(dx, dxv, i, C);
  }
}

template <typename KT>
struct DoutTimesXhat {
  const KT *dout, *inp;
  const float* rstd;
  int C;
  __device__ void operator()(long r, int c, float (&v)[1]) const { v[0] = ld(dout[r * C + c]) * ld(inp[r * C + c]) * rstd[r]; }
};

template <typename KT>
void rmsnorm_fw(KT* out, float* rstd, const KT* inp, const KT* weight, long N, int C, float eps) {
  rmsnorm_forward_kernel<<<blocks_for(N, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(out, rstd, inp, weight, N, C, eps);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void rmsnorm_bw(KT* dinp, float* dweight, const KT* dout, const KT* inp, const KT* weight, const float* rstd, long N, int C) {
  const dim3 grid(blocks_for(N, kWarpsPerBlock)), block(32, kWarpsPerBlock);
  if (packs_fit<KT>(C, dinp, dout, inp, weight))
    rmsnorm_backward_kernel<KT, true><<<grid, block>>>(dinp, dout, inp, weight, rstd, N, C);
  else
    rmsnorm_backward_kernel<KT, false><<<grid, block>>>(dinp, dout, inp, weight, rstd, N, C);
  DTRAIN_LAUNCH_CHECK();
  column_sum(dweight, N, C, DoutTimesXhat<KT>{dout, inp, rstd, C});
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, long N, int C, float eps) {
  rmsnorm_fw(out, rstd, inp, weight, N, C, eps);
}
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, long N, int C, float eps) {
  rmsnorm_fw(out, rstd, inp, weight, N, C, eps);
}
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight, const float* rstd, long N,
                      int C) {
  rmsnorm_bw(dinp, dweight, dout, inp, weight, rstd, N, C);
}
void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight, const float* rstd, long N,
                      int C) {
  rmsnorm_bw(dinp, dweight, dout, inp, weight, rstd, N, C);
}

}  // namespace dtrain::kernels::cuda
