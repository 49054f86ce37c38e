// The input gradient of a row normalisation, shared by LayerNorm (kCentered: xhat = (x - mean) * rstd)
// and RMSNorm (xhat = x * rstd): dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight *
// dout, without the mean(g) term for RMSNorm. A warp per row; each lane walks its 16-byte packs of the
// row (element by element where the row or the pointers do not fit packs); the pointers do not alias,
// so the loads of later packs are issued before the stores of earlier ones. Rows up to kFusedColumns
// wide also get the weight (and bias) gradients in the same pass (norm_backward_with_columns).
#pragma once
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"

namespace dtrain::kernels::cuda {

constexpr int kNormBackwardWarps = 8;

template <typename KT, bool kVector, bool kCentered>
__global__ void __launch_bounds__(32 * kNormBackwardWarps)
    norm_backward_kernel(KT* __restrict__ dinp, const KT* __restrict__ dout, const KT* __restrict__ inp, const KT* __restrict__ weight,
                         const float* __restrict__ mean /*(N) or null*/, const float* __restrict__ rstd, long N, int C) {
  constexpr int P = kPack<KT>;
  const long row = static_cast<long>(blockIdx.x) * kNormBackwardWarps + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  const KT* dy = dout + row * C;
  const float m = kCentered ? mean[row] : 0.0f, r = rstd[row];
  float sg = 0.0f, sgx = 0.0f;
#pragma unroll 4
  for (int i = lane * P; i < C; i += 32 * P) {
    float xv[P], dyv[P], wv[P];
    load_n<kVector>(xv, x, i, C);
    load_n<kVector>(dyv, dy, i, C);
    load_n<kVector>(wv, weight, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float g = wv[k] * dyv[k];
      if constexpr (kCentered) sg += g;
      sgx += g * ((xv[k] - m) * r);
    }
  }
  const float mean_g = kCentered ? warp_sum(sg) / C : 0.0f, mean_gx = warp_sum(sgx) / C;
  KT* dx = dinp + row * C;
#pragma unroll 4
  for (int i = lane * P; i < C; i += 32 * P) {
    float xv[P], dyv[P], wv[P], dxv[P];
    load_n<kVector>(xv, x, i, C);
    load_n<kVector>(dyv, dy, i, C);
    load_n<kVector>(wv, weight, i, C);
    load_n<kVector>(dxv, dx, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) dxv[k] += r * (wv[k] * dyv[k] - mean_g - (xv[k] - m) * r * mean_gx);
    store_n<kVector>(dx, dxv, i, C);
  }
}

// The input gradient and the weight (and, kCentered, bias) gradients in one pass, for rows of at most
// kFusedColumns columns: the rows split into `splits` ranges, a block per range whose kColumnWarps warps
// take every kColumnWarps-th row of it, each lane keeping its columns' sums of dout * xhat (and dout) in
// registers (the columns its kPacks packs cover, as in the input gradient) next to the row it holds; the
// warps then add their sums in warp order in shared memory, the block writes them to partials (K,
// splits, C), and column_total_kernel adds the splits in order: the same bits every run, no atomics.
// The gradients' rows are read once, where the input gradient and a separate column sum read them twice.
constexpr int kFusedColumns = 1024;
// A lane's pack of a row held in registers: load_n's, and zeros for a whole pack past the row (a row
// narrower than the 32 lanes' packs), which load_n would read as 16 bytes of the next row.
template <bool kVector, int kN, typename KT>
__device__ __forceinline__ void load_pack(float (&f)[kN], const KT* p, int i, int C) {
  if (kVector && i >= C) {
#pragma unroll
    for (int k = 0; k < kN; ++k) f[k] = 0.0f;
  } else {
    load_n<kVector>(f, p, i, C);
  }
}
// Calls f(std::integral_constant<int, packs>) for packs in 1..8: the 16-byte packs a lane holds of a row
// up to kFusedColumns wide (at most 4 in 16-bit types, 8 in fp32).
template <typename F>
void with_lane_packs(int packs, F f) {
  switch (packs) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    default: f(std::integral_constant<int, 8>{}); break;
  }
}
constexpr int kColumnWarps = 4;       // 4 warps of up to ~160 registers: 3 blocks an SM
constexpr int kRowsPerColumnSplit = 32;  // 8 rows a warp
template <typename KT, bool kVector, bool kCentered, int kPacks>
__global__ void __launch_bounds__(32 * kColumnWarps)
    norm_backward_columns_kernel(KT* __restrict__ dinp, float* __restrict__ partials /*(K,splits,C)*/, const KT* __restrict__ dout,
                                 const KT* __restrict__ inp, const KT* __restrict__ weight, const float* __restrict__ mean /*(N) or null*/,
                                 const float* __restrict__ rstd, long N, int C, long rows_per_split) {
  constexpr int P = kPack<KT>, K = kCentered ? 2 : 1;
  __shared__ float block_sums[K][kFusedColumns];
  const int lane = threadIdx.x, warp = threadIdx.y;
  const long begin = blockIdx.x * rows_per_split, end = begin + rows_per_split < N ? begin + rows_per_split : N;
  float acc[K][kPacks][P] = {};
  for (long row = begin + warp; row < end; row += kColumnWarps) {
    const KT* x = inp + row * C;
    const KT* dy = dout + row * C;
    const float m = kCentered ? mean[row] : 0.0f, r = rstd[row];
    float xhat[kPacks][P], g[kPacks][P];
    float sg = 0.0f, sgx = 0.0f;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int i = (j * 32 + lane) * P;
      float dyv[P], wv[P];
      load_pack<kVector>(xhat[j], x, i, C);
      load_pack<kVector>(dyv, dy, i, C);
      load_pack<kVector>(wv, weight, i, C);
#pragma unroll
      for (int k = 0; k < P; ++k) {  // past C every load is 0: no term
        xhat[j][k] = (xhat[j][k] - m) * r;
        g[j][k] = wv[k] * dyv[k];
        if constexpr (kCentered) sg += g[j][k], acc[1][j][k] += dyv[k];
        sgx += g[j][k] * xhat[j][k];
        acc[0][j][k] += dyv[k] * xhat[j][k];
      }
    }
    const float mean_g = kCentered ? warp_sum(sg) / C : 0.0f, mean_gx = warp_sum(sgx) / C;
    KT* dx = dinp + row * C;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int i = (j * 32 + lane) * P;
      if (i >= C) break;  // this lane's later packs are past the row too
      float dxv[P];
      load_n<kVector>(dxv, dx, i, C);
#pragma unroll
      for (int k = 0; k < P; ++k) dxv[k] += r * (g[j][k] - mean_g - xhat[j][k] * mean_gx);
      store_n<kVector>(dx, dxv, i, C);
    }
  }
  for (int w = 0; w < kColumnWarps; ++w) {  // the warps' sums, added in warp order
    if (warp == w)
#pragma unroll
      for (int q = 0; q < K; ++q)
#pragma unroll
        for (int j = 0; j < kPacks; ++j)
#pragma unroll
          for (int k = 0; k < P; ++k) {
            const int c = (j * 32 + lane) * P + k;
            if (c < C) block_sums[q][c] = (w == 0 ? 0.0f : block_sums[q][c]) + acc[q][j][k];
          }
    __syncthreads();
  }
  for (int e = warp * 32 + lane; e < K * C; e += 32 * kColumnWarps)
    partials[(static_cast<long>(e / C) * gridDim.x + blockIdx.x) * C + e % C] = block_sums[e / C][e % C];
}

// The input gradient and the weight (and bias) gradients in one pass (norm_backward_columns_kernel) when
// C <= kFusedColumns, adding the gradients into dweight (and dbias); false, launching nothing, for wider
// rows (the caller runs norm_backward_kernel and a column sum). Splits of kRowsPerColumnSplit rows, as
// many as the partials buffer holds: the count depends on N, C and K alone.
template <bool kCentered, typename KT>
bool norm_backward_with_columns(KT* dinp, float* dweight, float* dbias, const KT* dout, const KT* inp, const KT* weight, const float* mean,
                                const float* rstd, long N, int C) {
  constexpr int P = kPack<KT>, K = kCentered ? 2 : 1;
  if (C > kFusedColumns || N <= 0) return false;
  const long splits = std::min((N + kRowsPerColumnSplit - 1) / kRowsPerColumnSplit, kColumnPartials / (static_cast<long>(K) * C));
  const long rows_per_split = (N + splits - 1) / splits;
  float* partials = column_partials();
  const int packs = (C + 32 * P - 1) / (32 * P);
  const bool vector = packs_fit<KT>(C, dinp, dout, inp, weight);
  const dim3 grid(static_cast<unsigned>(splits)), block(32, kColumnWarps);
  auto launch = [&](auto packs_c) {
    constexpr int kP = decltype(packs_c)::value;
    if constexpr (kP * 32 * P > kFusedColumns) return;  // wider than any row this path takes
    else if (vector)
      norm_backward_columns_kernel<KT, true, kCentered, kP><<<grid, block>>>(dinp, partials, dout, inp, weight, mean, rstd, N, C, rows_per_split);
    else
      norm_backward_columns_kernel<KT, false, kCentered, kP><<<grid, block>>>(dinp, partials, dout, inp, weight, mean, rstd, N, C, rows_per_split);
  };
  with_lane_packs(packs, launch);
  DTRAIN_LAUNCH_CHECK();
  ColumnOutputs<K> outputs{};
  outputs.out[0] = dweight;
  if constexpr (kCentered) outputs.out[1] = dbias;
  launch_column_total<K>(outputs, partials, static_cast<int>(splits), C);
  DTRAIN_LAUNCH_CHECK();
  return true;
}

// Launches the kernel (the caller checks the launch, under its own name).
template <bool kCentered, typename KT>
void launch_norm_backward(KT* dinp, const KT* dout, const KT* inp, const KT* weight, const float* mean, const float* rstd, long N,
                          int C) {
  const dim3 grid(blocks_for(N, kNormBackwardWarps)), block(32, kNormBackwardWarps);
  if (packs_fit<KT>(C, dinp, dout, inp, weight))
    norm_backward_kernel<KT, true, kCentered><<<grid, block>>>(dinp, dout, inp, weight, mean, rstd, N, C);
  else
    norm_backward_kernel<KT, false, kCentered><<<grid, block>>>(dinp, dout, inp, weight, mean, rstd, N, C);
}

}  // namespace dtrain::kernels::cuda
