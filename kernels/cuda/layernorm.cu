// CUDA backend: layer normalisation over the last dim (biased variance, two passes), a
// warp per row; the weight and bias gradients are deterministic block column sums.
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

template <typename KT>
__global__ void layernorm_forward_kernel(KT* out, float* mean, float* rstd, const KT* inp, const KT* weight, const KT* bias, long N,
                                         int C, float eps) {
  const long row = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += ld(x[c]);
  const float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float d = ld(x[c]) - m;
    v += d * d;
  }
  const float r = rsqrtf(warp_sum(v) / C + eps);
  KT* o = out + row * C;
  for (int c = lane; c < C; c += 32) o[c] = st<KT>((ld(x[c]) - m) * r * ld(weight[c]) + ld(bias[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight * dout.
template <typename KT>
__global__ void layernorm_backward_kernel(KT* dinp, const KT* dout, const KT* inp, const KT* weight, const float* mean,
                                          const float* rstd, long N, int C) {
  const long row = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  const KT* dy = dout + row * C;
  const float m = mean[row], r = rstd[row];
  float sg = 0.0f, sgx = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float g = ld(weight[c]) * ld(dy[c]);
    sg += g;
    sgx += g * ((ld(x[c]) - m) * r);
  }
  const float mean_g = warp_sum(sg) / C, mean_gx = warp_sum(sgx) / C;
  KT* dx = dinp + row * C;
  for (int c = lane; c < C; c += 32) {
    const float xhat = (ld(x[c]) - m) * r;
    dx[c] = st<KT>(ld(dx[c]) + r * (ld(weight[c]) * ld(dy[c]) - mean_g - xhat * mean_gx));
  }
}

template <typename KT>
struct DoutTimesXhat {
  const KT *dout, *inp;
  const float *mean, *rstd;
  int C;
  __device__ float operator()(long r, int c) const { return ld(dout[r * C + c]) * ((ld(inp[r * C + c]) - mean[r]) * rstd[r]); }
};
template <typename KT>
struct Dout {
  const KT* dout;
  int C;
  __device__ float operator()(long r, int c) const { return ld(dout[r * C + c]); }
};

template <typename KT>
void layernorm_fw(KT* out, float* mean, float* rstd, const KT* inp, const KT* weight, const KT* bias, long N, int C, float eps) {
  layernorm_forward_kernel<<<blocks_for(N, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void layernorm_bw(KT* dinp, float* dweight, float* dbias, const KT* dout, const KT* inp, const KT* weight, const float* mean,
              const float* rstd, long N, int C) {
  layernorm_backward_kernel<<<blocks_for(N, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(dinp, dout, inp, weight, mean, rstd, N, C);
  DTRAIN_LAUNCH_CHECK();
  column_sum(dweight, N, C, DoutTimesXhat<KT>{dout, inp, mean, rstd, C});
  column_sum(dbias, N, C, Dout<KT>{dout, C});
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias, long N, int C,
                       float eps) {
  layernorm_fw(out, mean, rstd, inp, weight, bias, N, C, eps);
}
void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias, long N, int C,
                       float eps) {
  layernorm_fw(out, mean, rstd, inp, weight, bias, N, C, eps);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                        const float* mean, const float* rstd, long N, int C) {
  layernorm_bw(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                        const float* mean, const float* rstd, long N, int C) {
  layernorm_bw(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

}  // namespace dtrain::kernels::cuda
