// CUDA backend: the fp8 emulation of system.precision = fp8 (kernels/fp8_math.hpp's arithmetic on the
// device). fp8_amax is a fixed grid of blocks, each leaving its block's maximum in a device array, then
// one block combining them; a maximum does not depend on the order, so no atomics are needed for the
// same bits every run. fp8_round reads the amax on the device and derives the scale there: the host
// never waits for it.
#include "kernels/cuda/device_math.cuh"
#include "kernels/fp8_math.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kAmaxBlocks = 256;
constexpr int kAmaxThreads = 256;
__device__ float g_amax_partials[kAmaxBlocks];

// The combined maximum of a block's threads' values, left in part[0].
__device__ void combine_block(float* part) {
  __syncthreads();
  for (int s = kAmaxThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = fp8_amax_combine(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
}

template <typename KT>
__global__ void amax_partials_kernel(const KT* x, long n) {
  __shared__ float part[kAmaxThreads];
  float m = 0.0f;
  for (long i = static_cast<long>(blockIdx.x) * kAmaxThreads + threadIdx.x; i < n; i += static_cast<long>(kAmaxBlocks) * kAmaxThreads)
    m = fp8_amax_combine(m, fabsf(ld(x[i])));
  part[threadIdx.x] = m;
  combine_block(part);
  if (threadIdx.x == 0) g_amax_partials[blockIdx.x] = part[0];
}

__global__ void amax_combine_kernel(float* amax) {
  __shared__ float part[kAmaxThreads];
  part[threadIdx.x] = threadIdx.x < kAmaxBlocks ? g_amax_partials[threadIdx.x] : 0.0f;
  combine_block(part);
  if (threadIdx.x == 0) *amax = part[0];
}

template <typename KT>
__global__ void round_kernel(KT* out, const KT* x, const float* amax, long n, Fp8Format format) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float scale = fp8_scale(*amax, format);
  out[i] = st<KT>(fp8_round(ld(x[i]), scale, format));
}

template <typename KT>
void amax_of(float* amax, const KT* x, long n) {
  static_assert(kAmaxBlocks <= kAmaxThreads, "one thread per partial");
  amax_partials_kernel<<<kAmaxBlocks, kAmaxThreads>>>(x, n);
  DTRAIN_LAUNCH_CHECK();
  amax_combine_kernel<<<1, kAmaxThreads>>>(amax);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void round_to_fp8(KT* out, const KT* x, const float* amax, long n, int format) {
  round_kernel<<<blocks_for(n), kThreads>>>(out, x, amax, n, static_cast<Fp8Format>(format));
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

void fp8_amax(float* amax, const float* x, long n) { amax_of(amax, x, n); }
void fp8_amax(float* amax, const bf16* x, long n) { amax_of(amax, x, n); }
void fp8_amax(float* amax, const fp16* x, long n) { amax_of(amax, x, n); }
void fp8_round(float* out, const float* x, const float* amax, long n, int format) { round_to_fp8(out, x, amax, n, format); }
void fp8_round(bf16* out, const bf16* x, const float* amax, long n, int format) { round_to_fp8(out, x, amax, n, format); }
void fp8_round(fp16* out, const fp16* x, const float* amax, long n, int format) { round_to_fp8(out, x, amax, n, format); }

}  // namespace dtrain::kernels::cuda
