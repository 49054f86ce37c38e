// The building blocks of the fused attention kernels (kernels/cuda/attention_16bit.cu on tensor cores,
// kernels/cuda/attention_fp32.cu with FMAs), per thread block of kWarps warps over kTile x kTile tiles
// (kernels/flash_tiling.hpp): asynchronous tile copies into shared memory (cp.async, sm_80+), the walk
// over a sequence of tiles with one or two buffers, what a query-tile block works on, the backward's
// row sums of dO * O, and the shared-memory opt-in.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "common/error.hpp"
#include "kernels/flash_tiling.hpp"
#include "kernels/mma_fragments.hpp"

namespace dtrain::kernels::cuda::flash_tiles {

using namespace ::dtrain::kernels::flash;
using ::dtrain::bf16;
using ::dtrain::fp16;

constexpr int kBlockThreads = kWarps * 32;

// ---- asynchronous copies global -> shared (sm_80+): `bytes` of src, or zeros when !valid (src must
// still be a valid address). Below sm_80 (Turing, sm_75) the copies are plain loads and stores, done at
// once, and the group operations do nothing: every use of a tile is behind a __syncthreads anyway.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
#else
  *static_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
#else
  *static_cast<unsigned*>(dst) = valid ? *static_cast<const unsigned*>(src) : 0u;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

// The whole block: dst (Rows x D, row stride LD elements) <- rows [r0, r0 + Rows) of src (row stride
// ld elements), columns [0, HD); zeros for rows at or past T and columns at or past HD. Whole rows of
// 16-byte vectors go as asynchronous copies (complete at the next cp_async_wait); anything else is
// loaded at once.
template <typename KT, int D, int LD = D, int Rows = kTile>
__device__ void load_tile(KT* dst, const KT* src, long ld, int r0, int T, int HD) {
  constexpr int V = 16 / sizeof(KT);
  if (HD == D && ld % V == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
    for (int e = threadIdx.x; e < Rows * D / V; e += kBlockThreads) {
      const int r = e / (D / V), c = (e % (D / V)) * V;
      const bool valid = r0 + r < T;
      cp_async16(dst + r * LD + c, src + static_cast<long>(valid ? r0 + r : 0) * ld + c, valid);
    }
    return;
  }
  for (int e = threadIdx.x; e < Rows * D; e += kBlockThreads) {
    const int r = e / D, c = e % D;
    dst[r * LD + c] = (r0 + r < T && c < HD) ? src[static_cast<long>(r0 + r) * ld + c] : st<KT>(0.0f);
  }
}
// dst (kTile values of 4 bytes: floats, or ints) <- src[q0 .. q0 + kTile), zeros at or past T
// (asynchronous, 4 bytes a thread).
template <typename E>
__device__ void load_rows(E* dst, const E* src, int q0, int T) {
  static_assert(sizeof(E) == 4, "4-byte values");
  if (threadIdx.x < kTile) {
    const int q = q0 + static_cast<int>(threadIdx.x);
    cp_async4(dst + threadIdx.x, src + (q < T ? q : 0), q < T);
  }
}

// The first visible keys of query rows q0.. of a tile into dst (kTile ints: 0 past T), by the block's
// first kTile threads; the block's next __syncthreads makes them visible.
__device__ inline void load_first_keys(int* dst, KeyVisibility v, int q0, int T) {
  if (threadIdx.x < kTile) {
    const int q = q0 + static_cast<int>(threadIdx.x);
    dst[threadIdx.x] = q < T ? v.first_key(q, q) : 0;
  }
}

// ---- one warp's 16 x N fp32 accumulator C (+)= A (16 x K) B (K x N) with FMAs, operands and C in
// shared memory, each lane owning every 32nd element of C. ARow: A(i,k) at A[i*lda + k], else at
// A[k*lda + i]; BRow: B(k,j) at B[k*ldb + j], else at B[j*ldb + k].
template <int N>
struct WarpAcc {
  float* C;
  int ldc;
  __device__ WarpAcc(float* c, int l) : C(c), ldc(l) {}
  __device__ void zero() {
    for (int e = threadIdx.x % 32; e < 16 * N; e += 32) C[(e / N) * ldc + e % N] = 0.0f;
    __syncwarp();
  }
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
template <int N, bool ARow, bool BRow>
__device__ void warp_product(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int K) {
  WarpAcc<N> acc(C, ldc);
  acc.zero();
  acc.template mma<ARow, BRow>(A, lda, B, ldb, K);
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

// ---- tensor cores (bf16: sm_80+; fp16: sm_75+), one warp: the fragments of kernels/mma_fragments.hpp,
// for KT = bf16 or fp16 (the same layouts; ldmatrix moves 16-bit elements of either type).
// ldmatrix .x4 (.trans): this lane's row address p; r[i] <- matrix i (the lanes 8i..8i+7 addresses).
template <typename KT>
__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const KT* p) {
  static_assert(kHalfStorage<KT>, "ldmatrix moves 16-bit elements");
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
template <typename KT>
__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], const KT* p) {
  static_assert(kHalfStorage<KT>, "ldmatrix moves 16-bit elements");
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// c (16 x 8, fp32) += a (16 x 16, fp16) b (16 x 8, fp16) as two m16n8k8 products (sm_75+): the first
// takes a's registers 0-1 (columns 0-7) with b0 (rows 0-7), the second a's 2-3 with b1, by the PTX ISA's
// fragment tables of both shapes. Turing's form of mma_16816; run on newer GPUs by the GPU tests.
__device__ __forceinline__ void mma_16816_as_k8(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(b0));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[2]), "r"(a[3]), "r"(b1));
}
// c (16 x 8, fp32) += a (16 x 16, KT) b (16 x 8, KT). Below sm_80 only fp16 exists (as two k8 products);
// bf16 there is refused at start-up (placement), so its branch only traps.
template <typename KT>
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  static_assert(kHalfStorage<KT>, "the tensor-core path takes bf16 or fp16");
#if __CUDA_ARCH__ >= 800
// The PTX names the operand type (bf16 or f16); the operands are the same registers.
#define DTRAIN_MMA_16816(type) \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n" \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
  if constexpr (std::is_same_v<KT, bf16>)
    DTRAIN_MMA_16816("bf16");
  else
    DTRAIN_MMA_16816("f16");
#undef DTRAIN_MMA_16816
#else
  if constexpr (std::is_same_v<KT, bf16>)
    __trap();
  else
    mma_16816_as_k8(c, a, b0, b1);
#endif
}
// Two fp32 values rounded to KT (round to nearest even) in one register, lo in the lower half.
template <typename KT>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  static_assert(kHalfStorage<KT>, "two 16-bit values in a register");
  if constexpr (std::is_same_v<KT, bf16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

// What a forward or dQ block works on, from its grid position (query tiles of Rows rows, B*NH): its
// query tile (the heaviest, most keys, first), sample, query head and that head's key/value group, the
// packed qkv's row width W and the attention output's width C, and the sample's qkv rows.
template <typename KT, int Rows = kTile>
struct QueryTileBlock {
  int qt, b, h, g, W, C;
  const KT* rows;  // (T,W)
  __device__ QueryTileBlock(const KT* qkv, int T, int NH, int NKV, int HD)
      : qt(tiles(T, Rows) - 1 - static_cast<int>(blockIdx.x)), b(blockIdx.y / NH), h(blockIdx.y % NH), g(h / (NH / NKV)),
        W((NH + 2 * NKV) * HD), C(NH * HD), rows(qkv + static_cast<long>(b) * T * W) {}
  // The whole block: key tile kt of the head's key/value group into K and V (kTile,D; row stride LD).
  template <int D, int LD = D>
  __device__ void load_key_values(KT* K, KT* V, int kt, int T, int NKV, int HD) const {
    load_tile<KT, D, LD>(K, rows + C + g * HD, W, kt * kTile, T, HD);
    load_tile<KT, D, LD>(V, rows + C + NKV * HD + g * HD, W, kt * kTile, T, HD);
  }
};

// ---- backward, first step: Dsum[b,h,t] = rowsum(dout * out) over the head's HD columns. G lanes (a
// power of two, up to 32) per row and head, each summing its 16-byte packs of the two rows (G lanes
// cover a row of HD = 64 bf16 in one 16-byte load each), then a shuffle tree over the G lanes.
template <bool kVector, typename KT>
__global__ void row_dot_kernel(float* Dsum /*(B,NH,T)*/, const KT* dout /*(B,T,C)*/, const KT* out /*(B,T,C)*/, long rows_heads, int T,
                               int NH, int HD, int G) {
  constexpr int P = kPack<KT>;
  const long t = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long w = t / G;  // the (row, head) pair, row-major: row w / NH, head w % NH
  const int lane = static_cast<int>(t % G), h = static_cast<int>(w % NH);
  const long bt = w / NH;
  float s = 0.0f;
  if (w < rows_heads) {
    const KT* a = dout + bt * NH * HD + h * HD;
    const KT* o = out + bt * NH * HD + h * HD;
    for (int d = lane * P; d < HD; d += G * P) {
      float x[P], y[P];
      load_n<kVector>(x, a, d, HD);
      load_n<kVector>(y, o, d, HD);
#pragma unroll
      for (int k = 0; k < P; ++k) s += x[k] * y[k];
    }
  }
  for (int offset = G / 2; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);  // every lane of the warp takes part
  if (w < rows_heads && lane == 0) Dsum[(bt / T * NH + h) * T + bt % T] = s;
}
template <typename KT>
void row_dot(float* Dsum, const KT* dout, const KT* out, int B, int T, int NH, int HD) {
  const long rows_heads = static_cast<long>(B) * T * NH;
  int G = 1;
  while (G < 32 && G * kPack<KT> < HD) G *= 2;
  if (packs_fit<KT>(HD, dout, out))
    row_dot_kernel<true, KT><<<blocks_for(rows_heads * G), kThreads>>>(Dsum, dout, out, rows_heads, T, NH, HD, G);
  else
    row_dot_kernel<false, KT><<<blocks_for(rows_heads * G), kThreads>>>(Dsum, dout, out, rows_heads, T, NH, HD, G);
  DTRAIN_LAUNCH_CHECK();
}

// Raises a kernel's dynamic shared memory limit once (above 48 KiB needs the opt-in), with a clear error
// when the GPU offers less than the kernel needs.
template <typename Kernel>
void allow_smem(Kernel kernel, std::size_t bytes, const char* what, int HD) {
  int device = 0, limit = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<std::size_t>(limit))
    fatal(std::string("attention: the ") + what + " kernel for head dim " + std::to_string(HD) + " needs " + std::to_string(bytes >> 10) +
          " KiB of shared memory per block; this GPU offers " + std::to_string(limit >> 10) + " KiB");
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// Calls f(std::integral_constant<int, D>{}) with D the padded head dim of HD (16, 32, 64 or 128): the
// kernels are instantiated for those four.
template <typename F>
void with_padded_head_dim(int HD, F&& f) {
  switch (padded_head_dim(HD)) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default:
      fatal("attention: head dim " + std::to_string(HD) + " is above the CUDA backend's " + std::to_string(kMaxHeadDim) +
            " (model.hidden_size / model.num_attention_heads)");
  }
}

}  // namespace dtrain::kernels::cuda::flash_tiles
