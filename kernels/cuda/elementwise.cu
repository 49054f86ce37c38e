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

__device__ __forceinline__ float gelu(float x) {
  const float u = kGeluS * (x + kGeluC * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}
__device__ __forceinline__ float gelu_derivative(float x) {
  const float u = kGeluS * (x + kGeluC * x * x * x);
  const float du = kGeluS * (1.0f + 3.0f * kGeluC * x * x);
  const float e = expf(-2.0f * u);
  const float s = 1.0f / (1.0f + e);
  const float es = 1.0f / (1.0f + 1.0f / e);  // 1 - s, finite for e = 0 and e = inf
  return s + 2.0f * x * es * s * du;
}

// The packed kernels: a thread per kN elements (16-byte accesses when kVector: see load_n). In place
// (out equal to an input) is allowed: each thread reads its elements before it writes them.
#define DTRAIN_FOR_EACH_PACK(kN) const long i = (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) * (kN); if (i >= n) return
template <int kN>
int pack_blocks(long n) {
  return blocks_for((n + kN - 1) / kN);
}

template <bool kVector, typename KT>
__global__ void gelu_forward_kernel(KT* out, const KT* inp, long n) {
  constexpr int P = kPack<KT>;
  DTRAIN_FOR_EACH_PACK(P);
  float x[P];
  load_n<kVector>(x, inp, i, n);
#pragma unroll
  for (int k = 0; k < P; ++k) x[k] = gelu(x[k]);
  store_n<kVector>(out, x, i, n);
}

template <bool kVector, typename KT>
__global__ void gelu_backward_kernel(KT* dinp, const KT* inp, const KT* dout, long n) {
  constexpr int P = kPack<KT>;
  DTRAIN_FOR_EACH_PACK(P);
  float x[P], d[P];
  load_n<kVector>(x, inp, i, n);
  load_n<kVector>(d, dout, i, n);
#pragma unroll
  for (int k = 0; k < P; ++k) d[k] *= gelu_derivative(x[k]);
  store_n<kVector>(dinp, d, i, n);
}

template <bool kVector, typename KT>
__global__ void residual_kernel(KT* out, const KT* a, const KT* b, long n) {
  constexpr int P = kPack<KT>;
  DTRAIN_FOR_EACH_PACK(P);
  float x[P], y[P];
  load_n<kVector>(x, a, i, n);
  load_n<kVector>(y, b, i, n);
#pragma unroll
  for (int k = 0; k < P; ++k) x[k] += y[k];
  store_n<kVector>(out, x, i, n);
}

__global__ void fill_kernel(float* x, float value, long n) {
  DTRAIN_FOR_EACH_ELEMENT;
  x[i] = value;
}

// kN: the wider of the two types' packs (8 elements where one side is bf16 or fp16).
template <bool kVector, int kN, typename To, typename From>
__global__ void convert_kernel(To* out, const From* inp, long n) {
  DTRAIN_FOR_EACH_PACK(kN);
  float x[kN];
  load_n<kVector>(x, inp, i, n);
  store_n<kVector>(out, x, i, n);
}

template <typename KT>
void gelu_fw(KT* out, const KT* inp, long n) {
  constexpr int P = kPack<KT>;
  if (packs_fit<KT>(n, out, inp))
    gelu_forward_kernel<true><<<pack_blocks<P>(n), kThreads>>>(out, inp, n);
  else
    gelu_forward_kernel<false><<<pack_blocks<P>(n), kThreads>>>(out, inp, n);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void gelu_bw(KT* dinp, const KT* inp, const KT* dout, long n) {
  constexpr int P = kPack<KT>;
  if (packs_fit<KT>(n, dinp, inp, dout))
    gelu_backward_kernel<true><<<pack_blocks<P>(n), kThreads>>>(dinp, inp, dout, n);
  else
    gelu_backward_kernel<false><<<pack_blocks<P>(n), kThreads>>>(dinp, inp, dout, n);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void residual(KT* out, const KT* a, const KT* b, long n) {
  constexpr int P = kPack<KT>;
  if (packs_fit<KT>(n, out, a, b))
    residual_kernel<true><<<pack_blocks<P>(n), kThreads>>>(out, a, b, n);
  else
    residual_kernel<false><<<pack_blocks<P>(n), kThreads>>>(out, a, b, n);
  DTRAIN_LAUNCH_CHECK();
}
template <typename To, typename From>
void convert(To* out, const From* inp, long n) {
  if constexpr (std::is_same_v<To, From>)
    if (static_cast<const void*>(out) == static_cast<const void*>(inp)) return;  // fp32 -> fp32 in place
  if (n == 0) return;
  constexpr int P = kPack<To> > kPack<From> ? kPack<To> : kPack<From>;
  if (n % P == 0 && aligned16(out) && aligned16(inp))
    convert_kernel<true, P><<<pack_blocks<P>(n), kThreads>>>(out, inp, n);
  else
    convert_kernel<false, P><<<pack_blocks<P>(n), kThreads>>>(out, inp, n);
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

void fill(float* x, float value, long n) {
  fill_kernel<<<blocks_for(n), kThreads>>>(x, value, n);
  DTRAIN_LAUNCH_CHECK();
}

#define DTRAIN_ELEMENTWISE(KT)                                                                              \
  void gelu_forward(KT* out, const KT* inp, long n) { gelu_fw(out, inp, n); }                               \
  void gelu_backward(KT* dinp, const KT* inp, const KT* dout, long n) { gelu_bw(dinp, inp, dout, n); }      \
  void residual_forward(KT* out, const KT* inp1, const KT* inp2, long n) { residual(out, inp1, inp2, n); }  \
  void copy(KT* out, const KT* inp, long n) { copy_n(out, inp, n); }                                        \
  void zero(KT* x, long n) { zero_n(x, n); }                                                                \
  void narrow(KT* out, const float* inp, long n) { convert(out, inp, n); }                                  \
  void widen(float* out, const KT* inp, long n) { convert(out, inp, n); }
DTRAIN_ELEMENTWISE(float)
DTRAIN_ELEMENTWISE(bf16)
DTRAIN_ELEMENTWISE(fp16)
#undef DTRAIN_ELEMENTWISE

}  // namespace dtrain::kernels::cuda
