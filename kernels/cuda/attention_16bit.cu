// CUDA backend, bf16 and fp16 (one template on the 16-bit storage type KT): fused causal self-attention
// on tensor cores, flash-attention 2 style, every (sample, head) in one launch (kernels/flash_tiling.hpp:
// tiling and shared memory; kernels/mma_fragments.hpp: the lanes' fragments, tested on the host). Each
// warp owns 16 rows of a 64-row tile and keeps its scores, probabilities and accumulators in registers:
// mma.sync.m16n8k16 (bf16 or fp16 in, fp32 accumulation; the two types share the fragment layouts)
// with operands from shared memory through ldmatrix, and the probabilities of one product passed to the
// next as A fragments without leaving registers. The walked tiles are double-buffered (cp.async): the
// next one loads while the current one is multiplied.
//  - forward: a block per (query tile, sample x head) walks the key tiles up to the diagonal with an
//    online softmax (running maximum and sum per row, the output rescaled as the maximum grows), then
//    writes the output and each row's log-sum-exp; no (T,T) matrix reaches device memory;
//  - backward: Dsum = rowsum(dO * O), then two kernels that recompute the probabilities from the
//    log-sum-exp, so that no two blocks add into the same gradient (no atomics: the same bits every run):
//    one per (key tile, sample x key/value group) sums dK and dV over the group's query heads and the
//    query tiles that see it (its warps own key rows: S^T = K Q^T), one per (query tile, sample x head)
//    sums dQ over the key tiles it sees.
// The probabilities and score gradients are rounded to KT once, before the products that take them,
// where the host keeps them in fp32 (the GPU tests' tolerance says so). Where a row's keys are limited
// (KeyVisibility: documents packed in a sample, a sliding window), a query tile's walk starts at the key
// tile of its first row's first visible key (first_key_tile), a key tile's dK/dV walk ends at the first
// query tile whose rows' first keys are all after it (query_tiles_end), and each score is masked to its
// row's visible keys (visible_from). fp16's range (largest finite
// 65504): every product accumulates in fp32 registers, so scores, row sums and accumulators never meet
// it; only the values rounded to KT do. The probabilities stay in [0, 1] (the running maximum is
// subtracted before exp2 in the forward, the log-sum-exp, at least every score, in the backward), where
// fp16 rounds with at most 2^-11 relative error (2^-25 absolute below 2^-14, its subnormals). The score
// gradients dS = P (dP - D) / sqrt(HD) are not bounded: beyond 65504 they round to infinity, which the
// dynamic loss scale treats as any overflowing gradient (the host, keeping dS in fp32, overflows only
// where dQ or dK themselves pass 65504). The outputs round once, as on the host.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/cuda/warp_mma.cuh"
#include "kernels/flash_tiling.hpp"
#include "kernels/kernels.hpp"
#include "kernels/mma_fragments.hpp"

namespace dtrain::kernels::cuda {
namespace {

using namespace flash;
using namespace flash_tiles;
namespace frag = ::dtrain::kernels::mma;

constexpr float kLog2e = 1.4426950408889634f;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kScoreTiles = kTile / 8;  // 8-column C tiles across one key (or query) tile

// ---- forward: grid (query tiles of kWideRows rows, B*NH). Each warp owns M = 2 row tiles of 16 rows:
// every K and V fragment it reads from shared memory feeds both.
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) forward_kernel(KT* out /*(B,T,NH*HD)*/, float* lse /*(B,NH,T)*/,
                                                                const KT* qkv /*(B,T,W)*/, KeyVisibility visible, int T,
                                                                int NH, int NKV, int HD, float scale_log2) {
  constexpr int LD = mma_row_stride(D), DT = D / 8, M = kWideRows / (kWarps * 16);
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock<KT, kWideRows> at(qkv, T, NH, NKV, HD);
  KT* Qs = reinterpret_cast<KT*>(smem);  // (kWideRows,LD)
  KT* Kb = Qs + kWideRows * LD;          // 2 x (kTile,LD)
  KT* Vb = Kb + 2 * kTile * LD;          // 2 x (kTile,LD)
  const int lane = threadIdx.x % 32, r0 = (threadIdx.x / 32) * M * 16, q0 = at.qt * kWideRows;
  int qrow[M][2];  // this lane's two rows of each row tile
#pragma unroll
  for (int t = 0; t < M; ++t) qrow[t][0] = q0 + r0 + 16 * t + frag::c_row(lane, 0), qrow[t][1] = q0 + r0 + 16 * t + frag::c_row(lane, 2);
  const KeyVisibility vis = visible.from_row(static_cast<long>(at.b) * T);  // the sample's rows
  int qfirst[M][2] = {};  // those rows' first visible keys (0: causal only)
  if (vis.limits())
#pragma unroll
    for (int t = 0; t < M; ++t)
      for (int r = 0; r < 2; ++r) qfirst[t][r] = first_key_of_row(vis, qrow[t][r], T);
  const int first = first_key_tile(vis, q0);
  // The first visible key of this warp's first row: none of its rows sees a key before it.
  const int warp_first = first_key_of_row(vis, q0 + r0, T);

  load_tile<KT, D, LD, kWideRows>(Qs, at.rows + at.h * HD, at.W, q0, T, HD);
  FixedA<D, KT> q[M];                                  // this warp's query rows
  float o[M][DT][4] = {};                              // (16, D) unnormalised output of each row tile
  float m[M][2], l[M][2] = {};                         // running maximum (log2 units) and this lane's part of the sum
#pragma unroll
  for (int t = 0; t < M; ++t) m[t][0] = m[t][1] = -INFINITY;
  walk_tiles<2>(
      key_tiles_seen(at.qt, T, kWideRows) - first,
      [&](int i, int buf) { at.template load_key_values<D, LD>(Kb + buf * kTile * LD, Vb + buf * kTile * LD, first + i, T, NKV, HD); },
      [&](int i, int buf) {
        const int kt = first + i;
        if (i == 0)  // Q landed with the first key tile
#pragma unroll
          for (int t = 0; t < M; ++t) q[t].load(Qs + (r0 + 16 * t) * LD, LD);
        if (!rows_see_key_tile(q0 + r0, M * 16, kt)) return;  // a diagonal key tile wholly after this warp's rows
        if (warp_first > kt * kTile + kTile - 1) return;     // a key tile wholly before every key this warp's rows see
        float s[M][kScoreTiles][4] = {};  // (16, kTile) scores of each row tile, unscaled
        mma_a_bt<D, kScoreTiles>(s, q, Kb + buf * kTile * LD, LD);
        const bool masked = !unmasked_visible_pair(at.qt, kt, T, vis, kWideRows);
        std::uint32_t p[M][kScoreTiles / 2][4];
#pragma unroll
        for (int t = 0; t < M; ++t) {
          float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
          for (int n = 0; n < kScoreTiles; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              if (masked && !visible_from(qrow[t][e / 2], kt * kTile + n * 8 + frag::c_col(lane, e), T, qfirst[t][e / 2]))
                s[t][n][e] = -INFINITY;
              mx[e / 2] = fmaxf(mx[e / 2], s[t][n][e]);
            }
          float mu[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {  // the row's four lanes agree on its maximum (scale_log2 > 0 keeps it one)
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFull, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFull, mx[r], 2));
            const float m_new = fmaxf(m[t][r], mx[r] * scale_log2);
            mu[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row past T (or before this tile's keys) sees no key: zeros
            const float alpha = exp2f(m[t][r] - mu[r]);
            m[t][r] = m_new;
            l[t][r] *= alpha;
#pragma unroll
            for (int d = 0; d < DT; ++d) o[t][d][2 * r] *= alpha, o[t][d][2 * r + 1] *= alpha;
          }
#pragma unroll
          for (int n = 0; n < kScoreTiles; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              s[t][n][e] = exp2f(fmaf(s[t][n][e], scale_log2, -mu[e / 2]));
              l[t][e / 2] += s[t][n][e];
            }
          a_fragments<KT, kScoreTiles>(p[t], s[t]);
        }
        mma_p_b<kScoreTiles / 2, DT>(o, p, Vb + buf * kTile * LD, LD);  // O += P V
      });
#pragma unroll
  for (int t = 0; t < M; ++t) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[t][r] += __shfl_xor_sync(kFull, l[t][r], 1);
      l[t][r] += __shfl_xor_sync(kFull, l[t][r], 2);
      inv[r] = l[t][r] > 0.0f ? 1.0f / l[t][r] : 0.0f;
    }
    store_c_rows<DT>(out + static_cast<long>(at.b) * T * at.C + at.h * HD, at.C, o[t], q0 + r0 + 16 * t, T, HD, inv);
    if (lane % 4 == 0)
      for (int r = 0; r < 2; ++r)
        if (qrow[t][r] < T) lse[(static_cast<long>(at.b) * NH + at.h) * T + qrow[t][r]] = (m[t][r] + log2f(l[t][r])) / kLog2e;
  }
}

// ---- backward: dK and dV of one key tile of one key/value group: grid (key tiles, B*NKV). Sums over the
// group's query heads and the query tiles at or below it; the warps own key rows, so the products are
// transposed: S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) dkv_kernel(KT* dqkv /*(B,T,W)*/, const KT* dout /*(B,T,C)*/,
                                                            const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                            const KT* qkv /*(B,T,W)*/, KeyVisibility visible, int T,
                                                            int NH, int NKV, int HD, float scale, float scale_log2) {
  constexpr int LD = mma_row_stride(D), DT = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const int kt = blockIdx.x, b = blockIdx.y / NKV, g = blockIdx.y % NKV, group = NH / NKV;
  const int W = (NH + 2 * NKV) * HD, C = NH * HD;
  const KT* rows = qkv + static_cast<long>(b) * T * W;
  KT* Ks = reinterpret_cast<KT*>(smem);                           // (kTile,LD)
  KT* Vs = Ks + kTile * LD;                                       // (kTile,LD)
  KT* Qb = Vs + kTile * LD;                                       // 2 x (kTile,LD)
  KT* dOb = Qb + 2 * kTile * LD;                                  // 2 x (kTile,LD)
  float* lse_b = reinterpret_cast<float*>(dOb + 2 * kTile * LD);  // 2 x (kTile)
  float* D_b = lse_b + 2 * kTile;                                 // 2 x (kTile)
  int* ds_b = reinterpret_cast<int*>(D_b + 2 * kTile);            // 2 x (kTile): the query rows' first visible keys
  const int lane = threadIdx.x % 32, r0 = (threadIdx.x / 32) * kWarpRows, k0 = kt * kTile;
  const int krow[2] = {k0 + r0 + frag::c_row(lane, 0), k0 + r0 + frag::c_row(lane, 2)};  // this lane's two key rows
  const KeyVisibility vis = visible.from_row(static_cast<long>(b) * T);  // the sample's rows
  const int query_tiles = query_tiles_end(kt, T, vis) - first_query_tile(kt);

  load_tile<KT, D, LD>(Ks, rows + C + g * HD, W, k0, T, HD);
  load_tile<KT, D, LD>(Vs, rows + C + NKV * HD + g * HD, W, k0, T, HD);
  FixedA<D, KT> k_rows, v_rows;          // this warp's 16 key rows of K and of V
  float dk[DT][4] = {}, dv[DT][4] = {};  // (16, D) each
  // Step i: query head g*group + i / query_tiles, query tile first_query_tile(kt) + i % query_tiles.
  auto head_of = [&](int i) { return g * group + i / query_tiles; };
  auto tile_of = [&](int i) { return first_query_tile(kt) + i % query_tiles; };
  walk_tiles<2>(
      group * query_tiles,
      [&](int i, int buf) {
        const int h = head_of(i), q0 = tile_of(i) * kTile;
        const long stats = (static_cast<long>(b) * NH + h) * T;
        load_tile<KT, D, LD>(Qb + buf * kTile * LD, rows + h * HD, W, q0, T, HD);
        load_tile<KT, D, LD>(dOb + buf * kTile * LD, dout + static_cast<long>(b) * T * C + h * HD, C, q0, T, HD);
        load_rows(lse_b + buf * kTile, lse + stats, q0, T);
        load_rows(D_b + buf * kTile, Dsum + stats, q0, T);
        if (vis.limits()) load_first_keys(ds_b + buf * kTile, vis, q0, T);
      },
      [&](int i, int buf) {
        const KT* Qs = Qb + buf * kTile * LD;
        const KT* dOs = dOb + buf * kTile * LD;
        const float* lse_s = lse_b + buf * kTile;
        const float* D_s = D_b + buf * kTile;
        const int* ds_s = ds_b + buf * kTile;
        const int q0 = tile_of(i) * kTile;
        if (i == 0) k_rows.load(Ks + r0 * LD, LD), v_rows.load(Vs + r0 * LD, LD);  // landed with the first tile
        float s[kScoreTiles][4] = {}, dp[kScoreTiles][4] = {};  // (16 keys, kTile queries)
        mma_a_bt<D, kScoreTiles>(s, k_rows, Qs, LD);
        mma_a_bt<D, kScoreTiles>(dp, v_rows, dOs, LD);
        const bool masked = !unmasked_visible_pair(tile_of(i), kt, T, vis);
#pragma unroll
        for (int n = 0; n < kScoreTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = n * 8 + frag::c_col(lane, e);
            const bool seen = !masked || visible_from(q0 + c, krow[e / 2], T, vis.limits() ? ds_s[c] : 0);
            const float p = seen ? exp2f(fmaf(s[n][e], scale_log2, -lse_s[c] * kLog2e)) : 0.0f;
            s[n][e] = p;
            dp[n][e] = p * (dp[n][e] - D_s[c]) * scale;
          }
        std::uint32_t pa[kScoreTiles / 2][4], da[kScoreTiles / 2][4];
        a_fragments<KT, kScoreTiles>(pa, s);
        a_fragments<KT, kScoreTiles>(da, dp);
        mma_p_b<kScoreTiles / 2, DT>(dv, pa, dOs, LD);  // dV += P^T dO
        mma_p_b<kScoreTiles / 2, DT>(dk, da, Qs, LD);   // dK += dS^T Q
      });
  const float one[2] = {1.0f, 1.0f};
  KT* dst = dqkv + static_cast<long>(b) * T * W + C + g * HD;
  store_c_rows<DT>(dst, W, dk, k0 + r0, T, HD, one);
  store_c_rows<DT>(dst + NKV * HD, W, dv, k0 + r0, T, HD, one);
}

// ---- backward: dQ of one query tile of one head: grid (query tiles, B*NH).
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) dq_kernel(KT* dqkv /*(B,T,W)*/, const KT* dout /*(B,T,C)*/,
                                                           const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                           const KT* qkv /*(B,T,W)*/, KeyVisibility visible, int T,
                                                           int NH, int NKV, int HD, float scale, float scale_log2) {
  constexpr int LD = mma_row_stride(D), DT = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock<KT> at(qkv, T, NH, NKV, HD);
  KT* Qs = reinterpret_cast<KT*>(smem);  // (kTile,LD)
  KT* dOs = Qs + kTile * LD;             // (kTile,LD)
  KT* Kb = dOs + kTile * LD;             // 2 x (kTile,LD)
  KT* Vb = Kb + 2 * kTile * LD;          // 2 x (kTile,LD)
  const int lane = threadIdx.x % 32, r0 = (threadIdx.x / 32) * kWarpRows, q0 = at.qt * kTile;
  const int qrow[2] = {q0 + r0 + frag::c_row(lane, 0), q0 + r0 + frag::c_row(lane, 2)};
  const long stats = (static_cast<long>(at.b) * NH + at.h) * T;
  const KeyVisibility vis = visible.from_row(static_cast<long>(at.b) * T);  // the sample's rows
  float lse2[2], dsum[2];
  int qfirst[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    lse2[r] = qrow[r] < T ? lse[stats + qrow[r]] * kLog2e : 0.0f;
    dsum[r] = qrow[r] < T ? Dsum[stats + qrow[r]] : 0.0f;
    if (vis.limits()) qfirst[r] = first_key_of_row(vis, qrow[r], T);
  }
  const int first = first_key_tile(vis, q0);

  load_tile<KT, D, LD>(Qs, at.rows + at.h * HD, at.W, q0, T, HD);
  load_tile<KT, D, LD>(dOs, dout + static_cast<long>(at.b) * T * at.C + at.h * HD, at.C, q0, T, HD);
  FixedA<D, KT> q, d_o;  // this warp's 16 rows of Q and of dO
  float dq[DT][4] = {};  // (16, D)
  walk_tiles<2>(
      key_tiles_seen(at.qt, T) - first,
      [&](int i, int buf) { at.template load_key_values<D, LD>(Kb + buf * kTile * LD, Vb + buf * kTile * LD, first + i, T, NKV, HD); },
      [&](int i, int buf) {
        const int kt = first + i;
        if (i == 0) q.load(Qs + r0 * LD, LD), d_o.load(dOs + r0 * LD, LD);  // landed with the first key tile
        const KT* Ks = Kb + buf * kTile * LD;
        float s[kScoreTiles][4] = {}, dp[kScoreTiles][4] = {};  // (16 queries, kTile keys)
        mma_a_bt<D, kScoreTiles>(s, q, Ks, LD);
        mma_a_bt<D, kScoreTiles>(dp, d_o, Vb + buf * kTile * LD, LD);
        const bool masked = !unmasked_visible_pair(at.qt, kt, T, vis);
#pragma unroll
        for (int n = 0; n < kScoreTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const bool seen = !masked || visible_from(qrow[e / 2], kt * kTile + n * 8 + frag::c_col(lane, e), T, qfirst[e / 2]);
            const float p = seen ? exp2f(fmaf(s[n][e], scale_log2, -lse2[e / 2])) : 0.0f;
            dp[n][e] = p * (dp[n][e] - dsum[e / 2]) * scale;
          }
        std::uint32_t da[kScoreTiles / 2][4];
        a_fragments<KT, kScoreTiles>(da, dp);
        mma_p_b<kScoreTiles / 2, DT>(dq, da, Ks, LD);  // dQ += dS K
      });
  const float one[2] = {1.0f, 1.0f};
  store_c_rows<DT>(dqkv + static_cast<long>(at.b) * T * at.W + at.h * HD, at.W, dq, q0 + r0, T, HD, one);
}

// The launches, each in a function of its own name (the kernel profile's rows).
template <int D, typename KT>
void attention_forward_tensor_cores(KT* out, float* lse, const KT* qkv, KeyVisibility visible, int B, int T, int NH, int NKV, int HD) {
  constexpr std::size_t smem = mma_forward_smem(D);
  static const bool ready = (allow_smem(forward_kernel<KT, D>, smem, "forward", HD), true);
  (void)ready;
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(HD));
  forward_kernel<KT, D><<<dim3(tiles(T, kWideRows), B * NH), kBlockThreads, smem>>>(out, lse, qkv, visible, T, NH, NKV, HD, scale_log2);
  DTRAIN_LAUNCH_CHECK();
}

template <int D, typename KT>
void attention_dkv_tensor_cores(KT* dqkv, const float* Dsum, const KT* dout, const float* lse, const KT* qkv, KeyVisibility visible, int B,
                                int T, int NH, int NKV, int HD) {
  constexpr std::size_t smem = mma_dkv_smem(D);
  static const bool ready = (allow_smem(dkv_kernel<KT, D>, smem, "dK/dV", HD), true);
  (void)ready;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  dkv_kernel<KT, D><<<dim3(tiles(T), B * NKV), kBlockThreads, smem>>>(dqkv, dout, lse, Dsum, qkv, visible, T, NH, NKV, HD, scale,
                                                                      kLog2e * scale);
  DTRAIN_LAUNCH_CHECK();
}

template <int D, typename KT>
void attention_dq_tensor_cores(KT* dqkv, const float* Dsum, const KT* dout, const float* lse, const KT* qkv, KeyVisibility visible, int B,
                               int T, int NH, int NKV, int HD) {
  constexpr std::size_t smem = mma_dq_smem(D);
  static const bool ready = (allow_smem(dq_kernel<KT, D>, smem, "dQ", HD), true);
  (void)ready;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  dq_kernel<KT, D><<<dim3(tiles(T), B * NH), kBlockThreads, smem>>>(dqkv, dout, lse, Dsum, qkv, visible, T, NH, NKV, HD, scale,
                                                                     kLog2e * scale);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void flash_forward(KT* out, float* lse, const KT* qkv, KeyVisibility visible, int B, int T, int NH, int NKV, int HD) {
  with_padded_head_dim(HD, [&](auto D) { attention_forward_tensor_cores<decltype(D)::value>(out, lse, qkv, visible, B, T, NH, NKV, HD); });
}

template <typename KT>
void flash_backward(KT* dqkv, float* scratch, const KT* dout, const KT* out, const float* lse, const KT* qkv, KeyVisibility visible, int B,
                    int T, int NH, int NKV, int HD) {
  row_dot(scratch, dout, out, B, T, NH, HD);  // scratch: Dsum (B,NH,T)
  with_padded_head_dim(HD, [&](auto D) {
    attention_dkv_tensor_cores<decltype(D)::value>(dqkv, scratch, dout, lse, qkv, visible, B, T, NH, NKV, HD);
    attention_dq_tensor_cores<decltype(D)::value>(dqkv, scratch, dout, lse, qkv, visible, B, T, NH, NKV, HD);
  });
}

}  // namespace

#define DTRAIN_ATTENTION(KT)                                                                                                        \
  void attention_forward(KT* out, float* lse, float*, const KT* qkv, KeyVisibility visible, int B, int T, int NH, int NKV, int HD) { \
    flash_forward(out, lse, qkv, visible, B, T, NH, NKV, HD);                                                                     \
  }                                                                                                                                 \
  void attention_backward(KT* dqkv, float* scratch, const KT* dout, const KT* out, const float* lse, const KT* qkv,                 \
                          KeyVisibility visible, int B, int T, int NH, int NKV, int HD) {                                            \
    flash_backward(dqkv, scratch, dout, out, lse, qkv, visible, B, T, NH, NKV, HD);                                               \
  }
DTRAIN_ATTENTION(bf16)
DTRAIN_ATTENTION(fp16)
#undef DTRAIN_ATTENTION

}  // namespace dtrain::kernels::cuda
