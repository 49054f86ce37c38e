// CUDA twins of the elementwise kernels of kernel_api.inc (GELU, residual, scale, AdamW), with the
// host signatures. Launched on the default stream; pointers are device memory.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;
inline int blocks_for(long n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__device__ inline float gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__global__ void gelu_forward_kernel(float* out, const float* inp, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gelu_tanh(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  const float t = tanhf(u);
  const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  dinp[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, float factor, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void adamw_kernel(float* param, float* m, float* v, const float* grad, long n, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float bc1, float bc2) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = grad[i];
  const float mi = beta1 * m[i] + (1.0f - beta1) * g;
  const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  param[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + weight_decay * param[i]);
}

}  // namespace

void gelu_forward(float* out, const float* inp, long n) { gelu_forward_kernel<<<blocks_for(n), kThreads>>>(out, inp, n); }

void gelu_backward(float* dinp, const float* inp, const float* dout, long n) {
  gelu_backward_kernel<<<blocks_for(n), kThreads>>>(dinp, inp, dout, n);
}

void residual_forward(float* out, const float* inp1, const float* inp2, long n) {
  residual_forward_kernel<<<blocks_for(n), kThreads>>>(out, inp1, inp2, n);
}

void scale(float* x, float factor, long n) { scale_kernel<<<blocks_for(n), kThreads>>>(x, factor, n); }

void adamw_update(float* param, float* m, float* v, const float* grad, long n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int t) {
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(t));
  const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(t));
  adamw_kernel<<<blocks_for(n), kThreads>>>(param, m, v, grad, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}

}  // namespace dtrain::kernels::cuda
