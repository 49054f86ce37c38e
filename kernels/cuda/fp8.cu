// CUDA backend: the fp8 kernels of system.precision = fp8 (kernels/fp8_math.hpp's arithmetic on the
// device). fp8_amax is a fixed grid of blocks, each leaving its block's maximum in a device array, then
// one block combining them: a maximum does not depend on the order, so the same bits every run without
// atomics. The scales are derived from the amaxes on the device, so the host never waits. fp8_quantize
// writes codes row by row, or transposed through 32 x 32 tiles in shared memory (both sides coalesced).
// The GEMMs are cuBLASLt's fp8 matmuls (gemm_bias.cu: gemm_fp8_lt, the dequantization scales in device
// memory); where it has no algorithm (a dimension not a multiple of 16, a GPU below sm_89), a plain
// kernel computes the same sums: a thread per output, the decoded codes' products in fp32.
#include "kernels/cuda/device_math.cuh"
#include "kernels/fp8_math.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kAmaxBlocks = 256;
constexpr int kAmaxThreads = 256;
__device__ float g_amax_partials[kAmaxBlocks];
// The dequantization scales (1 / s) of a GEMM's two operands, in cuBLASLt's order: B's (our A) then A's.
__device__ float g_dequant_scales[2];

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
__global__ void quantize_kernel(std::uint8_t* codes, const KT* x, const float* amax, long n, Fp8Format f) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  codes[i] = fp8_encode(ld(x[i]) * fp8_scale(*amax, f), f);
}

constexpr int kTile = 32, kTileRows = 8;  // a block moves a 32 x 32 tile, 8 rows at a time

template <typename KT>
__global__ void quantize_transposed_kernel(std::uint8_t* codes, const KT* x, const float* amax, long R, long C, Fp8Format f) {
  __shared__ std::uint8_t tile[kTile][kTile + 4];
  const float scale = fp8_scale(*amax, f);
  const long r0 = static_cast<long>(blockIdx.y) * kTile, c0 = static_cast<long>(blockIdx.x) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const long r = r0 + i, c = c0 + threadIdx.x;
    if (r < R && c < C) tile[i][threadIdx.x] = fp8_encode(ld(x[r * C + c]) * scale, f);
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const long c = c0 + i, r = r0 + threadIdx.x;
    if (r < R && c < C) codes[c * R + r] = tile[threadIdx.x][i];
  }
}

__global__ void dequant_scales_kernel(const float* a_amax, Fp8Format af, const float* b_amax, Fp8Format bf) {
  g_dequant_scales[0] = 1.0f / fp8_scale(*b_amax, bf);
  g_dequant_scales[1] = 1.0f / fp8_scale(*a_amax, af);
}

// out (M,N) = beta out + A B^T / (s_A s_B) + bias, a thread per output.
template <typename TO, typename KT>
__global__ void gemm_fallback_kernel(TO* out, float beta, const std::uint8_t* a, Fp8Format af, const std::uint8_t* b, Fp8Format bf,
                                     const KT* bias, long M, long N, long K) {
  const long idx = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= M * N) return;
  const long i = idx / N, j = idx % N;
  float acc = 0.0f;
  for (long k = 0; k < K; ++k) acc += fp8_decode(a[i * K + k], af) * fp8_decode(b[j * K + k], bf);
  float v = acc * (g_dequant_scales[0] * g_dequant_scales[1]);
  if (bias) v += ld(bias[j]);
  if (beta != 0.0f) v += beta * ld(out[idx]);
  out[idx] = st<TO>(v);
}

template <typename KT>
__global__ void add_bias_kernel(float* out, const KT* bias, long M, long N) {
  const long idx = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < M * N) out[idx] += ld(bias[idx % N]);
}

const float* dequant_scales() {
  static float* const p = [] {
    void* q = nullptr;
    CUDA_CHECK(cudaGetSymbolAddress(&q, g_dequant_scales));
    return static_cast<float*>(q);
  }();
  return p;
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
void quantize(std::uint8_t* codes, const KT* x, const float* amax, long R, long C, int format, int transpose) {
  const auto f = static_cast<Fp8Format>(format);
  if (!transpose) {
    quantize_kernel<<<blocks_for(R * C), kThreads>>>(codes, x, amax, R * C, f);
  } else {
    const dim3 grid(static_cast<unsigned>((C + kTile - 1) / kTile), static_cast<unsigned>((R + kTile - 1) / kTile));
    quantize_transposed_kernel<<<grid, dim3(kTile, kTileRows)>>>(codes, x, amax, R, C, f);
  }
  DTRAIN_LAUNCH_CHECK();
}

// out (M,N) = beta out + A B^T + bias: cuBLASLt's fp8 GEMM (column-major D (N x M) = B^T A, the bias
// in its epilogue where the output is 16-bit), else the plain kernel.
template <typename TO, typename KT>
void gemm(TO* out, float beta, const std::uint8_t* a, int a_format, const float* a_amax, const std::uint8_t* b, int b_format,
          const float* b_amax, const KT* bias, long M, long N, long K) {
  const auto af = static_cast<Fp8Format>(a_format), bf = static_cast<Fp8Format>(b_format);
  if (af == Fp8Format::e5m2 && bf == Fp8Format::e5m2) fatal("internal error: an fp8 GEMM of two E5M2 operands");
  dequant_scales_kernel<<<1, 1>>>(a_amax, af, b_amax, bf);
  DTRAIN_LAUNCH_CHECK();
  const float* scales = dequant_scales();
  constexpr bool kEpilogueBias = std::is_same_v<TO, KT> && !std::is_same_v<KT, float>;
  const bool fits = M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX;
  if (fits && gemm_fp8_lt(static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), b, bf == Fp8Format::e5m2, scales, a,
                          af == Fp8Format::e5m2, scales + 1, kEpilogueBias ? reinterpret_cast<const TO*>(bias) : nullptr, beta, out)) {
    if constexpr (!kEpilogueBias) {
      if (bias) {
        static_assert(std::is_same_v<TO, float>, "a 16-bit output takes its bias in the epilogue");
        add_bias_kernel<<<blocks_for(M * N), kThreads>>>(out, bias, M, N);
        DTRAIN_LAUNCH_CHECK();
      }
    }
    return;
  }
  gemm_fallback_kernel<<<blocks_for(M * N), kThreads>>>(out, beta, a, af, b, bf, bias, M, N, K);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

#include "kernels/fp8_entries.inc"

}  // namespace dtrain::kernels::cuda
