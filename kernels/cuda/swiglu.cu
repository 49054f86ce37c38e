// CUDA backend: SwiGLU, out = silu(gate) * up with rows packed as [gate (F) | up (F)], a thread per output.
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

template <typename KT>
__global__ void swiglu_forward_kernel(KT* out, const KT* inp, long N, int F) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * F) return;
  const long row = i / F;
  const int f = static_cast<int>(i % F);
  const float g = ld(inp[row * 2 * F + f]), u = ld(inp[row * 2 * F + F + f]);
  out[i] = st<KT>(g / (1.0f + expf(-g)) * u);
}

template <typename KT>
__global__ void swiglu_backward_kernel(KT* dinp, const KT* inp, const KT* dout, long N, int F) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * F) return;
  const long row = i / F;
  const int f = static_cast<int>(i % F);
  const float g = ld(inp[row * 2 * F + f]), u = ld(inp[row * 2 * F + F + f]), dy = ld(dout[i]);
  const float s = 1.0f / (1.0f + expf(-g));
  dinp[row * 2 * F + f] = st<KT>(dy * u * s * (1.0f + g * (1.0f - s)));
  dinp[row * 2 * F + F + f] = st<KT>(dy * g * s);
}

template <typename KT>
void swiglu_fw(KT* out, const KT* inp, long N, int F) {
  swiglu_forward_kernel<<<blocks_for(N * F), kThreads>>>(out, inp, N, F);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void swiglu_bw(KT* dinp, const KT* inp, const KT* dout, long N, int F) {
  swiglu_backward_kernel<<<blocks_for(N * F), kThreads>>>(dinp, inp, dout, N, F);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

#define DTRAIN_SWIGLU(KT)                                                                                             \
  void swiglu_forward(KT* out, const KT* inp, long N, int F) { swiglu_fw(out, inp, N, F); }                           \
  void swiglu_backward(KT* dinp, const KT* inp, const KT* dout, long N, int F) { swiglu_bw(dinp, inp, dout, N, F); }
DTRAIN_SWIGLU(float)
DTRAIN_SWIGLU(bf16)
DTRAIN_SWIGLU(fp16)
#undef DTRAIN_SWIGLU

}  // namespace dtrain::kernels::cuda
