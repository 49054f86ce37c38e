// One warp's tensor-core products over tiles in shared memory, for the bf16 and fp16 fused attention
// (kernels/cuda/attention_16bit.cu): a fixed A operand held for a whole walk (FixedA), A B^T and P B
// over one or more 16-row tiles with m16n8k16 (mma_16816, flash_tiles.cuh), a product's C tiles turned into the next one's A
// fragments, and C tiles stored as global rows. Fragment layouts: kernels/mma_fragments.hpp.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/mma_fragments.hpp"

namespace dtrain::kernels::cuda::flash_tiles {
namespace frag = ::dtrain::kernels::mma;

// A warp's A operand (16 rows x K, row-major in shared memory) that stays the same for a whole walk
// over tiles (the block's fixed Q, dO, K or V rows): its fragments are read from shared memory once
// and kept in registers where they fit (K <= 64: 16 registers), else read at every use (K = 128, where
// the accumulators already fill the registers). Call load() once the tile has landed.
template <int K, typename KT>
struct FixedA {
  static constexpr bool kInRegisters = K <= 64;
  std::uint32_t f[kInRegisters ? K / 16 : 1][4];
  const KT* A = nullptr;
  int lda = 0;
  __device__ __forceinline__ void load(const KT* a, int ld) {
    A = a, lda = ld;
    if constexpr (kInRegisters) {
#pragma unroll
      for (int k = 0; k < K / 16; ++k) read(f[k], k);
    }
  }
  // The fragment of columns [16 k, 16 k + 16).
  __device__ __forceinline__ void fragment(std::uint32_t (&a)[4], int k) const {
    if constexpr (kInRegisters) {
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = f[k][r];
    } else {
      read(a, k);
    }
  }

 private:
  __device__ __forceinline__ void read(std::uint32_t (&a)[4], int k) const {
    const int lane = threadIdx.x % 32;
    ldsm_x4(a, A + frag::ldm_row_a(lane) * lda + 16 * k + frag::ldm_col_a(lane));
  }
};

// One warp, M row tiles: acc[m] (16 x 8 NT) += A[m] B^T, A[m] (16 x K) the warp's fixed operands and B
// (8 NT x K) a row-major tile in shared memory (row stride ldb): the "Q K^T" product, B's rows being
// keys (or queries). Each B fragment is read from shared memory once for the M products.
template <int K, int NT, int M, typename KT>
__device__ __forceinline__ void mma_a_bt(float (&acc)[M][NT][4], const FixedA<K, KT> (&A)[M], const KT* B, int ldb) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < K; k += 16) {
    std::uint32_t a[M][4];
#pragma unroll
    for (int m = 0; m < M; ++m) A[m].fragment(a[m], k / 16);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      std::uint32_t b[4];
      ldsm_x4(b, B + (n * 8 + frag::ldm_row_bt(lane)) * ldb + k + frag::ldm_col_bt(lane));
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mma_16816<KT>(acc[m][n], a[m], b[0], b[1]);
        mma_16816<KT>(acc[m][n + 1], a[m], b[2], b[3]);
      }
    }
  }
}
// One row tile.
template <int K, int NT, typename KT>
__device__ __forceinline__ void mma_a_bt(float (&acc)[NT][4], const FixedA<K, KT>& A, const KT* B, int ldb) {
  mma_a_bt<K, NT, 1>(reinterpret_cast<float(&)[1][NT][4]>(acc), reinterpret_cast<const FixedA<K, KT>(&)[1]>(A), B, ldb);
}

// One warp, M row tiles: acc[m] (16 x 8 NT) += P[m] B, P[m] (16 x 16 KC) given as A fragments in
// registers, B (16 KC x 8 NT) a row-major tile in shared memory (row stride ldb): the "P V" product.
// Each B fragment is read once for the M products.
template <int KC, int NT, int M, typename KT>
__device__ __forceinline__ void mma_p_b(float (&acc)[M][NT][4], const std::uint32_t (&p)[M][KC][4], const KT* B, int ldb) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kc = 0; kc < KC; ++kc)
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      std::uint32_t b[4];
      ldsm_x4_trans(b, B + (kc * 16 + frag::ldm_row_a(lane)) * ldb + n * 8 + frag::ldm_col_a(lane));
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mma_16816<KT>(acc[m][n], p[m][kc], b[0], b[1]);
        mma_16816<KT>(acc[m][n + 1], p[m][kc], b[2], b[3]);
      }
    }
}
// One row tile.
template <int KC, int NT, typename KT>
__device__ __forceinline__ void mma_p_b(float (&acc)[NT][4], const std::uint32_t (&p)[KC][4], const KT* B, int ldb) {
  mma_p_b<KC, NT, 1>(reinterpret_cast<float(&)[1][NT][4]>(acc), reinterpret_cast<const std::uint32_t(&)[1][KC][4]>(p), B, ldb);
}

// The A fragments (16 x 8 NT, KT) of a warp's C tiles (16 x 8 NT, fp32).
template <typename KT, int NT>
__device__ __forceinline__ void a_fragments(std::uint32_t (&a)[NT / 2][4], const float (&c)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT / 2; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float* t = c[2 * j + frag::a_from_c_tile(r)];
      a[j][r] = pack2<KT>(t[frag::a_from_c_value(r)], t[frag::a_from_c_value(r) + 1]);
    }
}

// Writes a warp's C tiles (16 rows x D head-dim columns, fp32, times `scale`) into global rows
// first_row + warp row (row stride ld), columns [0, HD); rows at or past T are skipped.
template <int DT, typename KT>
__device__ __forceinline__ void store_c_rows(KT* dst, long ld, const float (&c)[DT][4], int first_row, int T, int HD,
                                             const float (&scale)[2]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int d = 0; d < DT; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = first_row + frag::c_row(lane, e), col = d * 8 + frag::c_col(lane, e);
      if (row < T && col < HD) dst[static_cast<long>(row) * ld + col] = st<KT>(c[d][e] * scale[e / 2]);
    }
}

}  // namespace dtrain::kernels::cuda::flash_tiles
