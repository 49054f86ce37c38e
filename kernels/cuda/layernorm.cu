// CUDA backend: layer normalisation over the last dim (biased variance, two passes), a warp per row, the
// row held in registers when at most kFusedColumns wide (norm_forward.cuh, which also takes the residual
// add before the norm: residual_layernorm_forward). The backward in norm_backward.cuh: rows up to
// kFusedColumns wide in one pass with the weight and bias gradients; wider rows, the input gradient, then
// the weight and bias gradients as deterministic block column sums, both in one pass over the rows.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_backward.cuh"
#include "kernels/cuda/norm_forward.cuh"
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

// The weight and bias gradients' terms of row r, column c: dout * xhat and dout.
template <typename KT>
struct WeightAndBiasTerms {
  const KT *dout, *inp;
  const float *mean, *rstd;
  int C;
  __device__ void operator()(long r, int c, float (&v)[2]) const {
    const float dy = ld(dout[r * C + c]);
    v[0] = dy * ((ld(inp[r * C + c]) - mean[r]) * rstd[r]);
    v[1] = dy;
  }
};

template <typename KT>
void layernorm_fw(KT* out, float* mean, float* rstd, const KT* inp, const KT* weight, const KT* bias, long N, int C, float eps) {
  if (!launch_norm_forward_packs<true>(static_cast<KT*>(nullptr), out, mean, rstd, inp, static_cast<const KT*>(nullptr), weight, bias, N,
                                       C, eps))
    layernorm_forward_kernel<<<blocks_for(N, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
  DTRAIN_LAUNCH_CHECK();
}

// The residual add and the norm in one pass where the row fits registers, else the two kernels.
template <typename KT>
void residual_layernorm_fw(KT* res, KT* out, float* mean, float* rstd, const KT* inp1, const KT* inp2, const KT* weight, const KT* bias,
                           long N, int C, float eps) {
  if (launch_norm_forward_packs<true>(res, out, mean, rstd, inp1, inp2, weight, bias, N, C, eps)) {
    DTRAIN_LAUNCH_CHECK();
    return;
  }
  residual_forward(res, inp1, inp2, N * C);
  layernorm_fw(out, mean, rstd, res, weight, bias, N, C, eps);
}

template <typename KT>
void layernorm_bw(KT* dinp, float* dweight, float* dbias, const KT* dout, const KT* inp, const KT* weight, const float* mean,
              const float* rstd, long N, int C) {
  if (norm_backward_with_columns<true>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)) return;
  launch_norm_backward<true>(dinp, dout, inp, weight, mean, rstd, N, C);
  DTRAIN_LAUNCH_CHECK();
  column_sums<2>(ColumnOutputs<2>{{dweight, dbias}}, N, C, WeightAndBiasTerms<KT>{dout, inp, mean, rstd, C});
}

}  // namespace

// The entries of kernel_api.inc, for each storage type.
#define DTRAIN_LAYERNORM(KT)                                                                                                        \
  void layernorm_forward(KT* out, float* mean, float* rstd, const KT* inp, const KT* weight, const KT* bias, long N, int C, float eps) { \
    layernorm_fw(out, mean, rstd, inp, weight, bias, N, C, eps);                                                                     \
  }                                                                                                                                  \
  void residual_layernorm_forward(KT* res, KT* out, float* mean, float* rstd, const KT* inp1, const KT* inp2, const KT* weight,      \
                                  const KT* bias, long N, int C, float eps) {                                                       \
    residual_layernorm_fw(res, out, mean, rstd, inp1, inp2, weight, bias, N, C, eps);                                                \
  }                                                                                                                                  \
  void layernorm_backward(KT* dinp, float* dweight, float* dbias, const KT* dout, const KT* inp, const KT* weight, const float* mean, \
                          const float* rstd, long N, int C) {                                                                       \
    layernorm_bw(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);                                                         \
  }
DTRAIN_LAYERNORM(float)
DTRAIN_LAYERNORM(bf16)
DTRAIN_LAYERNORM(fp16)
#undef DTRAIN_LAYERNORM

}  // namespace dtrain::kernels::cuda
