// The building blocks of the fused attention kernels (kernels/cuda/attention.cu), per thread block of
// kWarps warps over kTile x kTile tiles (kernels/flash_tiling.hpp): asynchronous tile copies into
// shared memory (cp.async, sm_80+), one warp's 16-row accumulator on tensor cores (bf16, WMMA) or FMAs
// (fp32), and the walk over a sequence of tiles with one or two buffers. Only attention.cu includes it.
#pragma once
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/flash_tiling.hpp"

namespace dtrain::kernels::cuda::flash_tiles {

using namespace ::dtrain::kernels::flash;
namespace wmma = nvcuda::wmma;
using ::dtrain::bf16;

constexpr int kBlockThreads = kWarps * 32;

// ---- asynchronous copies global -> shared (sm_80+): `bytes` of src, or zeros when !valid (src must
// still be a valid address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// The whole block: dst (kTile x D) <- rows [r0, r0 + kTile) of src (row stride ld elements), columns
// [0, HD); zeros for rows at or past T and columns at or past HD. Whole rows of 16-byte vectors go as
// asynchronous copies (complete at the next cp_async_wait); anything else is loaded at once.
template <typename KT, int D>
__device__ void load_tile(KT* dst, const KT* src, long ld, int r0, int T, int HD) {
  constexpr int V = 16 / sizeof(KT);
  if (HD == D && ld % V == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
    for (int e = threadIdx.x; e < kTile * D / V; e += kBlockThreads) {
      const int r = e / (D / V), c = (e % (D / V)) * V;
      const bool valid = r0 + r < T;
      cp_async16(dst + r * D + c, src + static_cast<long>(valid ? r0 + r : 0) * ld + c, valid);
    }
    return;
  }
  for (int e = threadIdx.x; e < kTile * D; e += kBlockThreads) {
    const int r = e / D, c = e % D;
    dst[e] = (r0 + r < T && c < HD) ? src[static_cast<long>(r0 + r) * ld + c] : st<KT>(0.0f);
  }
}
// dst (kTile floats) <- src[q0 .. q0 + kTile), zeros at or past T (asynchronous, 4 bytes a thread).
inline __device__ void load_rows(float* dst, const float* src, int q0, int T) {
  if (threadIdx.x < kTile) {
    const int q = q0 + static_cast<int>(threadIdx.x);
    cp_async4(dst + threadIdx.x, src + (q < T ? q : 0), q < T);
  }
}

// ---- one warp's 16 x N fp32 accumulator C (+)= A (16 x K) B (K x N), operands in shared memory.
// ARow: A(i,k) at A[i*lda + k], else at A[k*lda + i]; BRow: B(k,j) at B[k*ldb + j], else at B[j*ldb + k].
// N and K are multiples of 16. bf16: WMMA fragments held in registers across calls (C in shared memory
// only when loaded or stored); fp32: the accumulator lives in shared memory (C), FMAs, each lane owning
// every 32nd element.
template <typename KT, int N>
struct WarpAcc;

template <int N>
struct WarpAcc<bf16, N> {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> f[N / 16];
  float* C;
  int ldc;
  __device__ WarpAcc(float* c, int l) : C(c), ldc(l) {}
  __device__ void zero() {
#pragma unroll
    for (int n = 0; n < N / 16; ++n) wmma::fill_fragment(f[n], 0.0f);
  }
  __device__ void load() {
#pragma unroll
    for (int n = 0; n < N / 16; ++n) wmma::load_matrix_sync(f[n], C + n * 16, ldc, wmma::mem_row_major);
  }
  __device__ void store() {
#pragma unroll
    for (int n = 0; n < N / 16; ++n) wmma::store_matrix_sync(C + n * 16, f[n], ldc, wmma::mem_row_major);
    __syncwarp();
  }
  template <bool ARow, bool BRow>
  __device__ void mma(const bf16* A, int lda, const bf16* B, int ldb, int K) {
    using AL = std::conditional_t<ARow, wmma::row_major, wmma::col_major>;
    using BL = std::conditional_t<BRow, wmma::row_major, wmma::col_major>;
    const auto* a = reinterpret_cast<const __nv_bfloat16*>(A);
    const auto* b = reinterpret_cast<const __nv_bfloat16*>(B);
    for (int k = 0; k < K; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, AL> fa;
      wmma::load_matrix_sync(fa, ARow ? a + k : a + k * lda, lda);
#pragma unroll
      for (int n = 0; n < N / 16; ++n) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, BL> fb;
        wmma::load_matrix_sync(fb, BRow ? b + k * ldb + n * 16 : b + n * 16 * ldb + k, ldb);
        wmma::mma_sync(f[n], fa, fb, f[n]);
      }
    }
  }
};

template <int N>
struct WarpAcc<float, N> {
  float* C;
  int ldc;
  __device__ WarpAcc(float* c, int l) : C(c), ldc(l) {}
  __device__ void zero() {
    for (int e = threadIdx.x % 32; e < 16 * N; e += 32) C[(e / N) * ldc + e % N] = 0.0f;
    __syncwarp();
  }
  __device__ void load() {}
  __device__ void store() {}
  template <bool ARow, bool BRow>
  __device__ void mma(const float* A, int lda, const float* B, int ldb, int K) {
    for (int e = threadIdx.x % 32; e < 16 * N; e += 32) {
      const int i = e / N, j = e % N;
      float s = C[i * ldc + j];
      for (int k = 0; k < K; ++k) s += (ARow ? A[i * lda + k] : A[k * lda + i]) * (BRow ? B[k * ldb + j] : B[j * ldb + k]);
      C[i * ldc + j] = s;
    }
    __syncwarp();
  }
};

// One warp: C (16 x N, fp32, shared) = A B, through a fresh accumulator.
template <typename KT, int N, bool ARow, bool BRow>
__device__ void warp_product(float* C, int ldc, const KT* A, int lda, const KT* B, int ldb, int K) {
  WarpAcc<KT, N> acc(C, ldc);
  acc.zero();
  acc.template mma<ARow, BRow>(A, lda, B, ldb, K);
  acc.store();
}

// The element tile a product reads the probabilities (or score gradients) from: its own tile in bf16,
// the fp32 tile itself in fp32 (written in place, each element by the lane that read it).
template <typename KT>
__device__ KT* score_copy(float* fp32_tile, unsigned char*& next) {
  if constexpr (std::is_same_v<KT, float>) {
    return fp32_tile;
  } else {
    KT* p = reinterpret_cast<KT*>(next);
    next += kTile * kTile * sizeof(KT);
    return p;
  }
}

// Walks n tiles with `stages` buffers: load(i, buffer) issues tile i's copies, use(i, buffer) runs once
// tile i has landed. With two stages tile i+1 loads while tile i is used. Every thread of the block
// calls it; extra asynchronous copies the caller issued before (the block's fixed tiles) are waited for
// with the first tile.
template <int Stages, typename Load, typename Use>
__device__ void walk_tiles(int n, Load load, Use use) {
  if constexpr (Stages == 2) {
    load(0, 0);
    cp_async_commit();
    for (int i = 0; i < n; ++i) {
      __syncthreads();  // every warp is done with the buffer tile i+1 goes into
      if (i + 1 < n) load(i + 1, (i + 1) % 2);
      cp_async_commit();
      cp_async_wait<1>();  // tile i (and everything before it) has landed
      __syncthreads();
      use(i, i % 2);
    }
  } else {
    for (int i = 0; i < n; ++i) {
      __syncthreads();
      load(i, 0);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      use(i, 0);
    }
  }
  cp_async_wait<0>();
  __syncthreads();
}

}  // namespace dtrain::kernels::cuda::flash_tiles
