// CUDA backend: RMS normalisation over the last dim (Llama's norm), a warp per row, the row held in
// registers when at most kFusedColumns wide (norm_forward.cuh, which also takes the residual add before
// the norm: residual_rmsnorm_forward). The backward in norm_backward.cuh: rows up to kFusedColumns wide in
// one pass with the weight gradient; wider rows, the input gradient, then the weight gradient as a
// deterministic block column sum.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_backward.cuh"
#include "kernels/cuda/norm_forward.cuh"
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

template <typename KT>
struct DoutTimesXhat {
  const KT *dout, *inp;
  const float* rstd;
  int C;
  __device__ void operator()(long r, int c, float (&v)[1]) const { v[0] = ld(dout[r * C + c]) * ld(inp[r * C + c]) * rstd[r]; }
};

template <typename KT>
void rmsnorm_fw(KT* out, float* rstd, const KT* inp, const KT* weight, long N, int C, float eps) {
  if (!launch_norm_forward_packs<false>(static_cast<KT*>(nullptr), out, static_cast<float*>(nullptr), rstd, inp,
                                        static_cast<const KT*>(nullptr), weight, static_cast<const KT*>(nullptr), N, C, eps))
    rmsnorm_forward_kernel<<<blocks_for(N, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(out, rstd, inp, weight, N, C, eps);
  DTRAIN_LAUNCH_CHECK();
}

// The residual add and the norm in one pass where the row fits registers, else the two kernels.
template <typename KT>
void residual_rmsnorm_fw(KT* res, KT* out, float* rstd, const KT* inp1, const KT* inp2, const KT* weight, long N, int C, float eps) {
  if (launch_norm_forward_packs<false>(res, out, static_cast<float*>(nullptr), rstd, inp1, inp2, weight, static_cast<const KT*>(nullptr),
                                       N, C, eps)) {
    DTRAIN_LAUNCH_CHECK();
    return;
  }
  residual_forward(res, inp1, inp2, N * C);
  rmsnorm_fw(out, rstd, res, weight, N, C, eps);
}

template <typename KT>
void rmsnorm_bw(KT* dinp, float* dweight, const KT* dout, const KT* inp, const KT* weight, const float* rstd, long N, int C) {
  if (norm_backward_with_columns<false>(dinp, dweight, static_cast<float*>(nullptr), dout, inp, weight, static_cast<const float*>(nullptr),
                                       rstd, N, C))
    return;
  launch_norm_backward<false>(dinp, dout, inp, weight, static_cast<const float*>(nullptr), rstd, N, C);
  DTRAIN_LAUNCH_CHECK();
  column_sum(dweight, N, C, DoutTimesXhat<KT>{dout, inp, rstd, C});
}

}  // namespace

// The entries of kernel_api.inc, for each storage type.
#define DTRAIN_RMSNORM(KT)                                                                                                          \
  void rmsnorm_forward(KT* out, float* rstd, const KT* inp, const KT* weight, long N, int C, float eps) {                          \
    rmsnorm_fw(out, rstd, inp, weight, N, C, eps);                                                                                   \
  }                                                                                                                                  \
  void residual_rmsnorm_forward(KT* res, KT* out, float* rstd, const KT* inp1, const KT* inp2, const KT* weight, long N, int C,      \
                                float eps) {                                                                                         \
    residual_rmsnorm_fw(res, out, rstd, inp1, inp2, weight, N, C, eps);                                                              \
  }                                                                                                                                  \
  void rmsnorm_backward(KT* dinp, float* dweight, const KT* dout, const KT* inp, const KT* weight, const float* rstd, long N, int C) { \
    rmsnorm_bw(dinp, dweight, dout, inp, weight, rstd, N, C);                                                                        \
  }
DTRAIN_RMSNORM(float)
DTRAIN_RMSNORM(bf16)
DTRAIN_RMSNORM(fp16)
#undef DTRAIN_RMSNORM

}  // namespace dtrain::kernels::cuda
