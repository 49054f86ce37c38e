// CUDA backend, fp32: fused causal self-attention with FMAs (no TF32), so that fp32 on the GPU matches
// the host; the bf16 and fp16 path (kernels/cuda/attention_16bit.cu) runs the same algorithm on tensor
// cores and its header says how. One launch covers every (sample, head): a thread block per (query tile, sample x
// head) in the forward pass keeps its query tile, walks the key tiles up to the diagonal with an online
// softmax (running maximum and sum per row, the output accumulator rescaled as the maximum grows), and
// writes the output and each row's log-sum-exp: no (T,T) matrix ever reaches device memory. The backward
// pass recomputes the probabilities from the log-sum-exp in two kernels, so that no two blocks add into
// the same gradient (no atomics: the same bits every run): one per (key tile, sample x key/value group)
// sums dK and dV over the group's query heads and the query tiles that see it, one per (query tile,
// sample x head) sums dQ over the key tiles it sees. Tiles are single-buffered and the scores and
// accumulators live in shared memory (kernels/flash_tiling.hpp: fma_*_smem). Documents packed in a
// sample and sliding windows (KeyVisibility) are handled as in the 16-bit kernels: walks start at
// first_key_tile and end at query_tiles_end, and scores are masked by visible_from.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/flash_tiling.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

using namespace flash;
using namespace flash_tiles;

constexpr float kLog2e = 1.4426950408889634f;
constexpr unsigned kFull = 0xffffffffu;

// ---- forward: grid (query tiles, B*NH).
template <int D>
__global__ void __launch_bounds__(kBlockThreads) flash_forward_kernel(float* out /*(B,T,NH*HD)*/, float* lse /*(B,NH,T)*/,
                                                                       const float* qkv /*(B,T,W)*/, KeyVisibility visible,
                                                                       int T, int NH, int NKV, int HD, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock<float> at(qkv, T, NH, NKV, HD);
  const int qt = at.qt, b = at.b, h = at.h, W = at.W, C = at.C;
  const float* rows = at.rows;
  float* Qs = reinterpret_cast<float*>(smem);  // (kTile,D)
  float* Kb = Qs + kTile * D;                  // (kTile,D)
  float* Vb = Kb + kTile * D;                  // (kTile,D)
  float* Sc = Vb + kTile * D;                  // (kTile,kTile) scores
  float* O = Sc + kTile * kTile;               // (kTile,D) unnormalised output
  float* ms = O + kTile * D;                   // (kTile) running maximum (log2 units)
  float* ls = ms + kTile;                      // (kTile) running sum
  float* P = Sc;                               // (kTile,kTile) probabilities, written over the scores
  const int lane = threadIdx.x % 32, r0 = (threadIdx.x / 32) * kWarpRows, q0 = qt * kTile;

  load_tile<float, D>(Qs, rows + h * HD, W, q0, T, HD);
  for (int e = threadIdx.x; e < kTile * D; e += kBlockThreads) O[e] = 0.0f;
  if (threadIdx.x < kTile) ms[threadIdx.x] = -INFINITY, ls[threadIdx.x] = 0.0f;
  // Two lanes per row of the warp's 16: lane 2i + half takes columns [32 half, 32 half + 32) of row i,
  // visited from a lane-dependent start so that the 32 lanes hit 32 different banks.
  const int mine = r0 + lane / 2, half = lane % 2, q = q0 + mine;
  const KeyVisibility vis = visible.from_row(static_cast<long>(b) * T);  // the sample's rows
  const int qfirst = first_key_of_row(vis, q, T), first = first_key_tile(vis, q0);
  walk_tiles<1>(
      key_tiles_seen(qt, T) - first,
      [&](int i, int buf) { at.template load_key_values<D>(Kb + buf * kTile * D, Vb + buf * kTile * D, first + i, T, NKV, HD); },
      [&](int i, int buf) {
        const int kt = first + i;
        warp_product<kTile, true, false>(Sc + r0 * kTile, kTile, Qs + r0 * D, D, Kb + buf * kTile * D, D, D);  // S = Q K^T
        const float* srow = Sc + mine * kTile + half * 32;
        float* prow = P + mine * kTile + half * 32;
        const int k0 = kt * kTile + half * 32;
        float mx = -INFINITY;
        for (int j = 0; j < 32; ++j) {
          const int c = (j + lane) % 32;
          if (visible_from(q, k0 + c, T, qfirst)) mx = fmaxf(mx, srow[c] * scale_log2);
        }
        mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
        const float m_old = ms[mine], m_new = fmaxf(m_old, mx);
        const float mu = m_new == -INFINITY ? 0.0f : m_new;  // a row past T (or before its document) sees no key: all zeros
        float sum = 0.0f;
        for (int j = 0; j < 32; ++j) {
          const int c = (j + lane) % 32;
          const float p = visible_from(q, k0 + c, T, qfirst) ? exp2f(srow[c] * scale_log2 - mu) : 0.0f;
          sum += p;
          prow[c] = p;
        }
        sum += __shfl_xor_sync(kFull, sum, 1);
        const float alpha = exp2f(m_old - mu);
        float* orow = O + mine * D + half * (D / 2);
        for (int j = 0; j < D / 2; ++j) orow[(j + lane) % (D / 2)] *= alpha;
        if (half == 0) ms[mine] = m_new, ls[mine] = ls[mine] * alpha + sum;
        __syncwarp();
        WarpAcc<D> o(O + r0 * D, D);  // O += P V
        o.template mma<true, true>(P + r0 * kTile, kTile, Vb + buf * kTile * D, D, kTile);
      });
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, qr = q0 + r;
    if (qr >= T) break;
    const float l = ls[r], inv = 1.0f / l;
    for (int d = lane; d < HD; d += 32) out[(static_cast<long>(b) * T + qr) * C + h * HD + d] = O[r * D + d] * inv;
    if (lane == 0) lse[(static_cast<long>(b) * NH + h) * T + qr] = (ms[r] + log2f(l)) / kLog2e;
  }
}

// The probabilities and score gradients of the warp's rows of one (query tile, key tile) pair from the
// fp32 scores (in Pf) and dP (in dPf): P = exp(S*scale - lse), dS = P (dP - Dsum) scale, written to the
// tiles Pe (null: not wanted) and dSe, which are Pf and dPf themselves (each element is written by
// the lane that read it). Lane c takes columns c and c + 32 of each row. firsts: the tile's rows' first
// visible keys (null: causal only).
__device__ void probabilities_and_gradients(float* Pe, float* dSe, const float* Pf, const float* dPf, const float* lse, const float* Dsum,
                                            const int* firsts, int r0, int q0, int k0, int T, float scale, float scale_log2) {
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, q = q0 + r;
    const float lse2 = lse[r] * kLog2e;
    const int first = firsts ? firsts[r] : 0;
    for (int c = lane; c < kTile; c += 32) {
      const float p = visible_from(q, k0 + c, T, first) ? exp2f(Pf[r * kTile + c] * scale_log2 - lse2) : 0.0f;
      const float ds = p * (dPf[r * kTile + c] - Dsum[r]) * scale;
      if (Pe) Pe[r * kTile + c] = p;
      dSe[r * kTile + c] = ds;
    }
  }
  __syncwarp();
}

// Writes a warp's 16 rows of a (kTile, D) tile into rows of global memory (row stride ld).
template <int D>
__device__ void store_rows(float* dst, long ld, const float* tile, int r0, int first_row, int T, int HD) {
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i;
    if (first_row + r >= T) break;
    for (int d = lane; d < HD; d += 32) dst[static_cast<long>(first_row + r) * ld + d] = tile[r * D + d];
  }
}

// ---- backward (after row_dot's Dsum), 1: dK and dV of one key tile of one key/value group: grid (key tiles, B*NKV), the
// heaviest (first) key tiles first. Sums over the group's query heads and the query tiles at or below it.
template <int D>
__global__ void __launch_bounds__(kBlockThreads) flash_backward_dkv_kernel(float* dqkv /*(B,T,W)*/, const float* dout /*(B,T,C)*/,
                                                                            const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                                            const float* qkv /*(B,T,W)*/, KeyVisibility visible, int T,
                                                                            int NH, int NKV, int HD, float scale, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int kt = blockIdx.x, b = blockIdx.y / NKV, g = blockIdx.y % NKV, group = NH / NKV;
  const int W = (NH + 2 * NKV) * HD, C = NH * HD;
  const float* rows = qkv + static_cast<long>(b) * T * W;
  float* Ks = reinterpret_cast<float*>(smem);  // (kTile,D)
  float* Vs = Ks + kTile * D;                  // (kTile,D)
  float* Qb = Vs + kTile * D;                  // (kTile,D)
  float* dOb = Qb + kTile * D;                 // (kTile,D)
  float* Pf = dOb + kTile * D;                 // (kTile,kTile) scores, query rows x keys
  float* dPf = Pf + kTile * kTile;             // (kTile,kTile)
  float* lse_b = dPf + kTile * kTile;          // (kTile)
  float* D_b = lse_b + kTile;                  // (kTile)
  float* Pe = Pf;                              // P and dS written over the scores
  float* dSe = dPf;
  int* ds_b = reinterpret_cast<int*>(D_b + kTile);  // (kTile) the query rows' first visible keys
  float* dK = D_b + 2 * kTile;                 // (kTile,D)
  float* dV = dK + kTile * D;                  // (kTile,D)
  const int r0 = (threadIdx.x / 32) * kWarpRows, k0 = kt * kTile;
  const KeyVisibility vis = visible.from_row(static_cast<long>(b) * T);  // the sample's rows
  const int query_tiles = query_tiles_end(kt, T, vis) - first_query_tile(kt);

  load_tile<float, D>(Ks, rows + C + g * HD, W, k0, T, HD);
  load_tile<float, D>(Vs, rows + C + NKV * HD + g * HD, W, k0, T, HD);
  WarpAcc<D> dk(dK + r0 * D, D), dv(dV + r0 * D, D);  // the warp's 16 key rows
  dk.zero();
  dv.zero();
  // Step i: query head g*group + i / query_tiles, query tile first_query_tile(kt) + i % query_tiles.
  auto head_of = [&](int i) { return g * group + i / query_tiles; };
  auto tile_of = [&](int i) { return first_query_tile(kt) + i % query_tiles; };
  walk_tiles<1>(
      group * query_tiles,
      [&](int i, int buf) {
        const int h = head_of(i), q0 = tile_of(i) * kTile;
        const long stats = (static_cast<long>(b) * NH + h) * T;
        load_tile<float, D>(Qb + buf * kTile * D, rows + h * HD, W, q0, T, HD);
        load_tile<float, D>(dOb + buf * kTile * D, dout + static_cast<long>(b) * T * C + h * HD, C, q0, T, HD);
        load_rows(lse_b + buf * kTile, lse + stats, q0, T);
        load_rows(D_b + buf * kTile, Dsum + stats, q0, T);
        if (vis.limits()) load_first_keys(ds_b, vis, q0, T);
      },
      [&](int i, int buf) {
        const float* Qs = Qb + buf * kTile * D;
        const float* dOs = dOb + buf * kTile * D;
        // The warp's query rows: S = Q K^T, dP = dO V^T, then P and dS.
        warp_product<kTile, true, false>(Pf + r0 * kTile, kTile, Qs + r0 * D, D, Ks, D, D);
        warp_product<kTile, true, false>(dPf + r0 * kTile, kTile, dOs + r0 * D, D, Vs, D, D);
        probabilities_and_gradients(Pe, dSe, Pf, dPf, lse_b + buf * kTile, D_b + buf * kTile, vis.limits() ? ds_b : nullptr, r0, tile_of(i) * kTile, k0,
                                    T, scale, scale_log2);
        __syncthreads();  // every query row's P and dS
        // The warp's key rows: dV += P^T dO, dK += dS^T Q.
        dv.template mma<false, true>(Pe + r0, kTile, dOs, D, kTile);
        dk.template mma<false, true>(dSe + r0, kTile, Qs, D, kTile);
      });
  float* dst = dqkv + static_cast<long>(b) * T * W + C + g * HD;
  store_rows<D>(dst, W, dK, r0, k0, T, HD);
  store_rows<D>(dst + NKV * HD, W, dV, r0, k0, T, HD);
}

// ---- backward, 2: dQ of one query tile of one head: grid (query tiles, B*NH).
template <int D>
__global__ void __launch_bounds__(kBlockThreads) flash_backward_dq_kernel(float* dqkv /*(B,T,W)*/, const float* dout /*(B,T,C)*/,
                                                                           const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                                           const float* qkv /*(B,T,W)*/, KeyVisibility visible, int T, int NH,
                                                                           int NKV, int HD, float scale, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock<float> at(qkv, T, NH, NKV, HD);
  const int qt = at.qt, b = at.b, h = at.h, W = at.W, C = at.C;
  const float* rows = at.rows;
  float* Qs = reinterpret_cast<float*>(smem);  // (kTile,D)
  float* dOs = Qs + kTile * D;                 // (kTile,D)
  float* Kb = dOs + kTile * D;                 // (kTile,D)
  float* Vb = Kb + kTile * D;                  // (kTile,D)
  float* Pf = Vb + kTile * D;                  // (kTile,kTile)
  float* dPf = Pf + kTile * kTile;             // (kTile,kTile)
  float* lse_s = dPf + kTile * kTile;          // (kTile)
  float* D_s = lse_s + kTile;                  // (kTile)
  float* dSe = dPf;                            // dS written over dP
  float* dQ = D_s + kTile;                     // (kTile,D)
  int* ds_s = reinterpret_cast<int*>(dQ + kTile * D);  // (kTile) the tile's rows' first visible keys
  const int r0 = (threadIdx.x / 32) * kWarpRows, q0 = qt * kTile;
  const long stats = (static_cast<long>(b) * NH + h) * T;
  const KeyVisibility vis = visible.from_row(static_cast<long>(b) * T);  // the sample's rows
  const int first = first_key_tile(vis, q0);

  load_tile<float, D>(Qs, rows + h * HD, W, q0, T, HD);
  load_tile<float, D>(dOs, dout + static_cast<long>(b) * T * C + h * HD, C, q0, T, HD);
  load_rows(lse_s, lse + stats, q0, T);
  load_rows(D_s, Dsum + stats, q0, T);
  if (vis.limits()) load_first_keys(ds_s, vis, q0, T);
  WarpAcc<D> dq(dQ + r0 * D, D);
  dq.zero();
  walk_tiles<1>(
      key_tiles_seen(qt, T) - first,
      [&](int i, int buf) { at.template load_key_values<D>(Kb + buf * kTile * D, Vb + buf * kTile * D, first + i, T, NKV, HD); },
      [&](int i, int buf) {
        const int kt = first + i;
        const float* Ks = Kb + buf * kTile * D;
        warp_product<kTile, true, false>(Pf + r0 * kTile, kTile, Qs + r0 * D, D, Ks, D, D);
        warp_product<kTile, true, false>(dPf + r0 * kTile, kTile, dOs + r0 * D, D, Vb + buf * kTile * D, D, D);
        probabilities_and_gradients(nullptr, dSe, Pf, dPf, lse_s, D_s, vis.limits() ? ds_s : nullptr, r0, q0, kt * kTile, T, scale, scale_log2);
        dq.template mma<true, true>(dSe + r0 * kTile, kTile, Ks, D, kTile);  // dQ += dS K
      });
  store_rows<D>(dqkv + static_cast<long>(b) * T * W + h * HD, W, dQ, r0, q0, T, HD);
}

template <int D>
void forward_for(float* out, float* lse, const float* qkv, KeyVisibility visible, int B, int T, int NH, int NKV, int HD) {
  constexpr std::size_t smem = fma_forward_smem(D);
  static const bool ready = (allow_smem(flash_forward_kernel<D>, smem, "forward", HD), true);
  (void)ready;
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(HD));
  flash_forward_kernel<D><<<dim3(tiles(T), B * NH), kBlockThreads, smem>>>(out, lse, qkv, visible, T, NH, NKV, HD, scale_log2);
  DTRAIN_LAUNCH_CHECK();
}

template <int D>
void backward_for(float* dqkv, float* Dsum, const float* dout, const float* lse, const float* qkv, KeyVisibility visible, int B, int T, int NH,
                  int NKV, int HD) {
  constexpr std::size_t dkv = fma_dkv_smem(D), dq = fma_dq_smem(D);
  static const bool ready =
      (allow_smem(flash_backward_dkv_kernel<D>, dkv, "dK/dV", HD), allow_smem(flash_backward_dq_kernel<D>, dq, "dQ", HD), true);
  (void)ready;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD)), scale_log2 = kLog2e * scale;
  flash_backward_dkv_kernel<D><<<dim3(tiles(T), B * NKV), kBlockThreads, dkv>>>(dqkv, dout, lse, Dsum, qkv, visible, T, NH, NKV, HD,
                                                                                    scale, scale_log2);
  DTRAIN_LAUNCH_CHECK();
  flash_backward_dq_kernel<D><<<dim3(tiles(T), B * NH), kBlockThreads, dq>>>(dqkv, dout, lse, Dsum, qkv, visible, T, NH, NKV, HD, scale,
                                                                                 scale_log2);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

void attention_forward(float* out, float* lse, float*, const float* qkv, KeyVisibility visible, int B, int T, int NH, int NKV, int HD) {
  with_padded_head_dim(HD, [&](auto D) { forward_for<decltype(D)::value>(out, lse, qkv, visible, B, T, NH, NKV, HD); });
}
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* out, const float* lse, const float* qkv,
                        KeyVisibility visible, int B, int T, int NH, int NKV, int HD) {
  row_dot(scratch, dout, out, B, T, NH, HD);  // scratch: Dsum (B,NH,T)
  with_padded_head_dim(HD, [&](auto D) { backward_for<decltype(D)::value>(dqkv, scratch, dout, lse, qkv, visible, B, T, NH, NKV, HD); });
}

}  // namespace dtrain::kernels::cuda
