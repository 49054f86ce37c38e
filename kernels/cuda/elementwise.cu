// CUDA backend: the elementwise kernels (GELU, residual add, copy, zero, fill, scale, narrow, widen).
// GELU is the tanh approximation written as x * sigmoid(2u) like the host's, with no cancellation and
// no inf * 0 for large |x|.
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr float kGeluS = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluC = 0.044715f;

#define DTRAIN_FOR_EACH_ELEMENT const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; if (i >= n) return

template <typename KT>
__global__ void gelu_forward_kernel(KT* out, const KT* inp, long n) {
  DTRAIN_FOR_EACH_ELEMENT;
  const float x = ld(inp[i]);
  const float u = kGeluS * (x + kGeluC * x * x * x);
  out[i] = st<KT>(x / (1.0f + expf(-2.0f * u)));
}

template <typename KT>
__global__ void gelu_backward_kernel(KT* dinp, const KT* inp, const KT* dout, long n) {
  DTRAIN_FOR_EACH_ELEMENT;
  const float x = ld(inp[i]);
  const float u = kGeluS * (x + kGeluC * x * x * x);
  const float du = kGeluS * (1.0f + 3.0f * kGeluC * x * x);
  const float e = expf(-2.0f * u);
  const float s = 1.0f / (1.0f + e);
  const float es = 1.0f / (1.0f + 1.0f / e);  // 1 - s, finite for e = 0 and e = inf
  dinp[i] = st<KT>(ld(dout[i]) * (s + 2.0f * x * es * s * du));
}

template <typename KT>
__global__ void residual_kernel(KT* out, const KT* a, const KT* b, long n) {
  DTRAIN_FOR_EACH_ELEMENT;
  out[i] = st<KT>(ld(a[i]) + ld(b[i]));
}

__global__ void fill_kernel(float* x, float value, long n) {
  DTRAIN_FOR_EACH_ELEMENT;
  x[i] = value;
}

__global__ void scale_kernel(float* x, float factor, long n) {
  DTRAIN_FOR_EACH_ELEMENT;
  x[i] *= factor;
}

template <typename To, typename From>
__global__ void convert_kernel(To* out, const From* inp, long n) {
  DTRAIN_FOR_EACH_ELEMENT;
  out[i] = st<To>(ld(inp[i]));
}

template <typename KT>
void gelu_fw(KT* out, const KT* inp, long n) {
  gelu_forward_kernel<<<blocks_for(n), kThreads>>>(out, inp, n);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void gelu_bw(KT* dinp, const KT* inp, const KT* dout, long n) {
  gelu_backward_kernel<<<blocks_for(n), kThreads>>>(dinp, inp, dout, n);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void residual(KT* out, const KT* a, const KT* b, long n) {
  residual_kernel<<<blocks_for(n), kThreads>>>(out, a, b, n);
  DTRAIN_LAUNCH_CHECK();
}
template <typename To, typename From>
void convert(To* out, const From* inp, long n) {
  if constexpr (std::is_same_v<To, From>)
    if (static_cast<const void*>(out) == static_cast<const void*>(inp)) return;  // fp32 -> fp32 in place
  if (n == 0) return;
  convert_kernel<<<blocks_for(n), kThreads>>>(out, inp, n);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void copy_n(KT* out, const KT* inp, long n) {
  if (out != inp && n > 0) CUDA_CHECK(cudaMemcpyAsync(out, inp, sizeof(KT) * n, cudaMemcpyDeviceToDevice, 0));
}
template <typename KT>
void zero_n(KT* x, long n) {
  if (n > 0) CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(KT) * n, 0));
}

}  // namespace

void gelu_forward(float* out, const float* inp, long n) { gelu_fw(out, inp, n); }
void gelu_forward(bf16* out, const bf16* inp, long n) { gelu_fw(out, inp, n); }
void gelu_backward(float* dinp, const float* inp, const float* dout, long n) { gelu_bw(dinp, inp, dout, n); }
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, long n) { gelu_bw(dinp, inp, dout, n); }
void residual_forward(float* out, const float* inp1, const float* inp2, long n) { residual(out, inp1, inp2, n); }
void residual_forward(bf16* out, const bf16* inp1, const bf16* inp2, long n) { residual(out, inp1, inp2, n); }
void copy(float* out, const float* inp, long n) { copy_n(out, inp, n); }
void copy(bf16* out, const bf16* inp, long n) { copy_n(out, inp, n); }
void zero(float* x, long n) { zero_n(x, n); }
void zero(bf16* x, long n) { zero_n(x, n); }
void fill(float* x, float value, long n) {
  fill_kernel<<<blocks_for(n), kThreads>>>(x, value, n);
  DTRAIN_LAUNCH_CHECK();
}
void scale(float* x, float factor, long n) {
  scale_kernel<<<blocks_for(n), kThreads>>>(x, factor, n);
  DTRAIN_LAUNCH_CHECK();
}
void narrow(float* out, const float* inp, long n) { convert(out, inp, n); }
void narrow(bf16* out, const float* inp, long n) { convert(out, inp, n); }
void widen(float* out, const float* inp, long n) { convert(out, inp, n); }
void widen(float* out, const bf16* inp, long n) { convert(out, inp, n); }

}  // namespace dtrain::kernels::cuda
