// Shared by the CUDA kernels: element loads and stores in each storage type (fp32 arithmetic on all
// three; bf16 and fp16 round to nearest even, fp16 overflows to infinity beyond 65504), launch
// shapes, warp reductions, a deterministic column reduction, and the cuBLAS GEMM every matmul and
// attention product goes through. Everything runs on the default stream, the rank's compute stream;
// the NCCL backend orders its own streams after it.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/error.hpp"
#include "common/storage_type.hpp"

namespace dtrain::kernels::cuda {

constexpr int kThreads = 256;
// At least one block: an empty launch is a valid no-op rather than a configuration error.
inline int blocks_for(long n, int threads = kThreads) { return n > 0 ? static_cast<int>((n + threads - 1) / threads) : 1; }
// Launch check (launch_check.cu): a bad configuration or a fault of an earlier kernel is reported where
// it is seen. DTRAIN_SYNC_LAUNCH=1 also waits for every launch, so a faulting kernel is named at its own
// launch; DTRAIN_KERNEL_PROFILE=FILE waits too and writes the device time per kernel to FILE at exit.
// `what` is the host wrapper's name (__func__) or a GEMM's shape.
void check_launch(const char* what, const char* file, int line);
bool launch_checks_wait();  // DTRAIN_SYNC_LAUNCH or DTRAIN_KERNEL_PROFILE set
#define DTRAIN_LAUNCH_CHECK() ::dtrain::kernels::cuda::check_launch(__func__, __FILE__, __LINE__)

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(::dtrain::bf16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }
__device__ __forceinline__ float ld(::dtrain::fp16 x) { return __half2float(__ushort_as_half(x.bits)); }
template <typename T>
__device__ __forceinline__ T st(float f);
template <>
__device__ __forceinline__ float st<float>(float f) {
  return f;
}
template <>
__device__ __forceinline__ ::dtrain::bf16 st<::dtrain::bf16>(float f) {
  return ::dtrain::bf16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
}
template <>
__device__ __forceinline__ ::dtrain::fp16 st<::dtrain::fp16>(float f) {
  return ::dtrain::fp16{__half_as_ushort(__float2half_rn(f))};
}
// The two 16-bit storage types (bf16, fp16), whose kernels share one template.
template <typename T>
constexpr bool kHalfStorage = std::is_same_v<T, ::dtrain::bf16> || std::is_same_v<T, ::dtrain::fp16>;

// Packs: kPack<KT> consecutive elements, 16 bytes. load_n/store_n move kN elements (a whole number of
// packs) from element i, by 128-bit accesses when kVector (the caller checked that the length is a
// multiple of the pack and the pointers are 16-byte aligned: packs_fit), else element by element with
// the elements at or past `end` read as 0 and not written (any length, any alignment). Elements are
// fp32 in registers either way.
template <typename KT>
constexpr int kPack = 16 / static_cast<int>(sizeof(KT));
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
template <typename KT, typename... Ptr>
bool packs_fit(long length, const Ptr*... pointers) {
  return length % kPack<KT> == 0 && (aligned16(pointers) && ...);
}
template <bool kVector, int kN, typename KT>
__device__ __forceinline__ void load_n(float (&f)[kN], const KT* p, long i, long end) {
  static_assert(kN % kPack<KT> == 0, "whole packs");
  if constexpr (kVector) {
#pragma unroll
    for (int h = 0; h < kN / kPack<KT>; ++h) {
      const uint4 raw = *reinterpret_cast<const uint4*>(p + i + h * kPack<KT>);
      const KT* e = reinterpret_cast<const KT*>(&raw);
#pragma unroll
      for (int k = 0; k < kPack<KT>; ++k) f[h * kPack<KT> + k] = ld(e[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kN; ++k) f[k] = i + k < end ? ld(p[i + k]) : 0.0f;
  }
}
template <bool kVector, int kN, typename KT>
__device__ __forceinline__ void store_n(KT* p, const float (&f)[kN], long i, long end) {
  static_assert(kN % kPack<KT> == 0, "whole packs");
  if constexpr (kVector) {
#pragma unroll
    for (int h = 0; h < kN / kPack<KT>; ++h) {
      uint4 raw;
      KT* e = reinterpret_cast<KT*>(&raw);
#pragma unroll
      for (int k = 0; k < kPack<KT>; ++k) e[k] = st<KT>(f[h * kPack<KT> + k]);
      *reinterpret_cast<uint4*>(p + i + h * kPack<KT>) = raw;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kN; ++k)
      if (i + k < end) p[i + k] = st<KT>(f[k]);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Maximum that keeps a NaN (fmaxf drops it), as the host's lane_max does.
__device__ __forceinline__ float max_keep_nan(float a, float b) { return (isnan(b) || b > a) ? b : a; }
__device__ __forceinline__ float warp_max_keep_nan(float v) {
  for (int o = 16; o > 0; o >>= 1) v = max_keep_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// K column sums in one pass over the rows: out[k][c] += sum over rows r < N of v[k], where f(r, c, v)
// fills v[0..K) (a norm's weight and bias gradients read their rows once), for c < C, in two launches:
// a grid of (32 columns) x (splits of the rows) thread blocks of 32 x 32 threads, each thread summing
// every 32nd row of its split and the block adding its 32 partial sums in a fixed order into partials
// (K, splits, C); then column_total_kernel adding each column's splits in a fixed order. The number of splits
// depends only on N, C and K (column_splits), so the result is the same bits on every run and every
// GPU; no atomics. The partials live in one device buffer of kColumnPartials floats (column_sum.cu).
constexpr long kColumnPartials = 1L << 20;
float* column_partials();
inline int column_splits(long N, int C, int K) {
  long splits = std::clamp((N + 511) / 512, 1L, 32L);  // at least 512 rows a split, at most 32 splits
  if (C > 0) splits = std::min(splits, std::max(1L, kColumnPartials / (static_cast<long>(K) * C)));  // the partials must fit
  return static_cast<int>(splits);
}
template <int K>
struct ColumnOutputs {
  float* out[K];
};
template <int K, typename F>
__global__ void column_partial_kernel(float* partials /*(K,splits,C)*/, long N, int C, long rows_per_split, F f) {
  __shared__ float part[K][32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const long begin = blockIdx.y * rows_per_split, end = begin + rows_per_split < N ? begin + rows_per_split : N;
  float acc[K] = {};
  if (c < C)
    for (long r = begin + threadIdx.y; r < end; r += 32) {
      float v[K];
      f(r, c, v);
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] += v[k];
    }
#pragma unroll
  for (int k = 0; k < K; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < C)
    for (int k = 0; k < K; ++k) {
      float s = 0.0f;
      for (int y = 0; y < 32; ++y) s += part[k][y][threadIdx.x];
      partials[(static_cast<long>(k) * gridDim.y + blockIdx.y) * C + c] = s;
    }
}
// out[k][c] += the sum of partials[k][y][c] over the splits y: a block per (32 columns, k), lane = column,
// warp w summing splits w, w + kTotalWarps, ... (a chain of splits / 32 dependent loads and adds, where
// one thread per column walked all of them: 512 splits of a norm's 16384 rows), then warp 0 adding the
// warps' sums in warp order. A fixed order: the same bits every run.
constexpr int kTotalWarps = 32;
template <int K>
__global__ void __launch_bounds__(32 * kTotalWarps)
    column_total_kernel(ColumnOutputs<K> outputs, const float* partials /*(K,splits,C)*/, int splits, int C) {
  __shared__ float part[kTotalWarps][33];
  const int lane = threadIdx.x, warp = threadIdx.y, c = blockIdx.x * 32 + lane, k = blockIdx.y;
  float s = 0.0f;
  if (c < C)
    for (int y = warp; y < splits; y += kTotalWarps) s += partials[(static_cast<long>(k) * splits + y) * C + c];
  part[warp][lane] = s;
  __syncthreads();
  if (warp == 0 && c < C) {
    float total = 0.0f;
    for (int w = 0; w < kTotalWarps; ++w) total += part[w][lane];
    outputs.out[k][c] += total;
  }
}
// Launches column_total_kernel over C columns and the K outputs (the caller checks the launch).
template <int K>
void launch_column_total(ColumnOutputs<K> outputs, const float* partials /*(K,splits,C)*/, int splits, int C) {
  column_total_kernel<K><<<dim3(blocks_for(C, 32), K), dim3(32, kTotalWarps)>>>(outputs, partials, splits, C);
}
template <int K, typename F>
void column_sums(ColumnOutputs<K> outputs, long N, int C, F f) {
  if (static_cast<long>(K) * C > kColumnPartials)
    fatal("column_sum: " + std::to_string(K) + " x " + std::to_string(C) + " columns exceed the partials buffer of " +
          std::to_string(kColumnPartials) + " floats");
  const int splits = column_splits(N, C, K);
  const long rows_per_split = (N + splits - 1) / splits;
  float* partials = column_partials();
  column_partial_kernel<K><<<dim3(blocks_for(C, 32), splits), dim3(32, 32)>>>(partials, N, C, rows_per_split, f);
  DTRAIN_LAUNCH_CHECK();
  launch_column_total<K>(outputs, partials, splits, C);
  DTRAIN_LAUNCH_CHECK();
}
// One column sum, f(r, c, v) filling v[0].
template <typename F>
void column_sum(float* out, long N, int C, F f) {
  column_sums<1>(ColumnOutputs<1>{{out}}, N, C, f);
}

// out[c] += the sum over rows of x (N, C), a matrix in memory (a layer's bias gradient): each lane sums
// one 16-byte pack of columns (element by element where the row or x do not fit packs) over every 8th
// row of its split, the block's 8 warps add theirs in warp order, then column_total_kernel the splits
// in order; no atomics, the same bits every run. About kMatrixColumnBlocks blocks whatever C is (the
// split count depends only on N, C and the type).
constexpr int kMatrixColumnWarps = 8;
constexpr int kMatrixColumnBlocks = 528;
template <typename KT, bool kVector>
__global__ void __launch_bounds__(32 * kMatrixColumnWarps)
    matrix_column_partial_kernel(float* partials /*(splits,C)*/, const KT* x, long N, int C, long rows_per_split) {
  constexpr int P = kPack<KT>;
  __shared__ float part[kMatrixColumnWarps][32 * P];
  const int lane = threadIdx.x, warp = threadIdx.y, c0 = (blockIdx.x * 32 + lane) * P;
  const long begin = blockIdx.y * rows_per_split, end = begin + rows_per_split < N ? begin + rows_per_split : N;
  float acc[P] = {};
  if (c0 < C)
#pragma unroll 4
    for (long r = begin + warp; r < end; r += kMatrixColumnWarps) {
      float v[P];
      load_n<kVector>(v, x + r * C, c0, C);
#pragma unroll
      for (int k = 0; k < P; ++k) acc[k] += v[k];
    }
#pragma unroll
  for (int k = 0; k < P; ++k) part[warp][lane * P + k] = acc[k];
  __syncthreads();
  for (int e = warp * 32 + lane; e < 32 * P; e += 32 * kMatrixColumnWarps) {
    const int c = blockIdx.x * 32 * P + e;
    if (c >= C) continue;
    float s = 0.0f;
    for (int w = 0; w < kMatrixColumnWarps; ++w) s += part[w][e];
    partials[static_cast<long>(blockIdx.y) * C + c] = s;
  }
}
template <typename KT>
void matrix_column_sums(float* out /*(C), added to*/, const KT* x /*(N,C)*/, long N, int C) {
  if (N <= 0 || C <= 0) return;
  if (C > kColumnPartials)
    fatal("matrix_column_sums: " + std::to_string(C) + " columns exceed the partials buffer of " + std::to_string(kColumnPartials) + " floats");
  constexpr int P = kPack<KT>;
  const long column_blocks = (C + 32 * P - 1) / (32 * P);
  const long splits = std::clamp(std::min((kMatrixColumnBlocks + column_blocks - 1) / column_blocks, (N + kMatrixColumnWarps - 1) / kMatrixColumnWarps),
                                 1L, kColumnPartials / C);
  const long rows_per_split = (N + splits - 1) / splits;
  float* partials = column_partials();
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(splits)), block(32, kMatrixColumnWarps);
  if (packs_fit<KT>(C, x))
    matrix_column_partial_kernel<KT, true><<<grid, block>>>(partials, x, N, C, rows_per_split);
  else
    matrix_column_partial_kernel<KT, false><<<grid, block>>>(partials, x, N, C, rows_per_split);
  DTRAIN_LAUNCH_CHECK();
  launch_column_total<1>(ColumnOutputs<1>{{out}}, partials, static_cast<int>(splits), C);
  DTRAIN_LAUNCH_CHECK();
}

// The cuBLAS handle of this process (created on first use, on the current device, default stream).
cublasHandle_t cublas();

template <typename T>
constexpr cudaDataType_t cuda_type();
template <>
constexpr cudaDataType_t cuda_type<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t cuda_type<::dtrain::bf16>() {
  return CUDA_R_16BF;
}
template <>
constexpr cudaDataType_t cuda_type<::dtrain::fp16>() {
  return CUDA_R_16F;
}

// Column-major C (m x n, ldc) = alpha * op(A) op(B) + beta * C, `batch` times with the given strides
// (elements), accumulated in fp32 (CUBLAS_COMPUTE_32F: no TF32, so fp32 runs match the host).
template <typename TA, typename TC>
void gemm(bool transa, bool transb, int m, int n, int k, float alpha, const TA* A, int lda, long stride_a, const TA* B, int ldb,
          long stride_b, float beta, TC* C, int ldc, long stride_c, int batch = 1) {
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas(), transa ? CUBLAS_OP_T : CUBLAS_OP_N, transb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                          &alpha, A, cuda_type<TA>(), lda, stride_a, B, cuda_type<TA>(), ldb, stride_b, &beta, C,
                                          cuda_type<TC>(), ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (launch_checks_wait()) {  // name the GEMM by its shape in the profile (only when waiting: a string per call)
    char what[96];
    std::snprintf(what, sizeof what, "gemm %c%c m=%d n=%d k=%d batch=%d", transa ? 'T' : 'N', transb ? 'T' : 'N', m, n, k, batch);
    check_launch(what, __FILE__, __LINE__);
  }
}

// Column-major D (m x n, ldd = m) = op(A) op(B) + bias (m values, one per row of D) with the bias added
// in cuBLASLt's epilogue (gemm_bias.cu), accumulated in fp32 as gemm is. false, with nothing done, where
// a 16-bit bias for a 16-bit output is not 16-byte aligned or cuBLASLt has no algorithm for these types
// and alignments (said on stderr for the first such shapes): the caller then adds the bias itself.
template <typename TA, typename TD>
bool gemm_bias(bool transa, bool transb, int m, int n, int k, const TA* A, int lda, const TA* B, int ldb, const TA* bias, TD* D);
// Column-major D (m x n, ldd = m) = gelu(op(A) op(B) + bias) with pre (m x n, ld m) = op(A) op(B) + bias
// (bias null: none),
// in cuBLASLt's GELU_AUX_BIAS epilogue (tanh GELU from the fp32 accumulator); and D = (op(A) op(B)) *
// gelu'(pre) in its DGELU epilogue. false, with nothing done, where the bias or pre is not 16-byte
// aligned, m is not a multiple of 8, or cuBLASLt has no algorithm: the caller then makes the passes itself.
template <typename T>
bool gemm_bias_gelu(bool transa, bool transb, int m, int n, int k, const T* A, int lda, const T* B, int ldb, const T* bias, T* D, T* pre);
template <typename T>
bool gemm_dgelu(bool transa, bool transb, int m, int n, int k, const T* A, int lda, const T* B, int ldb, const T* pre, T* D);
// Column-major D (m x n, ld m) = a_scale b_scale A^T B + beta D (+ bias, m values, one per row of D;
// null: none) of fp8 codes A (k x m, ld k: each of D's rows a column of k contiguous codes) and B (k x n,
// ld k), E4M3 or E5M2 (not both E5M2), their dequantization scales in device memory, accumulated in
// fp32 (gemm_bias.cu: cuBLASLt on sm_89 and newer). false, with nothing done, where cuBLASLt has no
// algorithm (fp8 wants k and the leading dimensions multiples of 16) or the bias is not 16-byte aligned.
template <typename TD>
bool gemm_fp8_lt(int m, int n, int k, const std::uint8_t* A, bool a_e5m2, const float* a_scale, const std::uint8_t* B, bool b_e5m2,
                 const float* b_scale, const TD* bias, float beta, TD* D);

}  // namespace dtrain::kernels::cuda
