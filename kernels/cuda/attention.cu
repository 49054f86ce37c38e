// CUDA backend: fused causal self-attention, flash-attention style (kernels/flash_tiling.hpp holds the
// tiling and the shared-memory budget). One launch covers every (sample, head): a thread block per
// (query tile, sample x head) in the forward pass keeps its query tile, walks the key tiles up to the
// diagonal with an online softmax (running maximum and sum per row, the output accumulator rescaled as
// the maximum grows), and writes the output and each row's log-sum-exp: no (T,T) matrix ever reaches
// device memory. The backward pass recomputes the probabilities from the log-sum-exp in two kernels,
// so that no two blocks add into the same gradient (no atomics: the same bits every run): one per (key
// tile, sample x key/value group) sums dK and dV over the group's query heads and the query tiles that
// see it, one per (query tile, sample x head) sums dQ over the key tiles it sees.
// bf16: products on tensor cores (WMMA 16x16x16, fp32 accumulation; the backward's accumulators stay in
// registers), the walked tiles double-buffered with asynchronous copies (cp.async) so the next tile
// loads while the current one is used. fp32: the same algorithm with FMAs (no TF32, so fp32 matches the
// host), single buffers. The probabilities and score gradients are rounded to the storage type once,
// before the products that take them, where the host's bf16 arithmetic keeps them in fp32 (the GPU
// tests' tolerance says so).
#include <cmath>
#include <string>
#include <type_traits>

#include "common/error.hpp"
#include "kernels/attention_scratch.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/flash_tiling.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

using namespace flash;
using namespace flash_tiles;
using ::dtrain::bf16;

constexpr float kLog2e = 1.4426950408889634f;
constexpr unsigned kFull = 0xffffffffu;

// What a forward or dQ block works on, from its grid position (query tiles, B*NH): its query tile (the
// heaviest, most keys, first), sample, query head and that head's key/value group, the packed qkv's row
// width W and the attention output's width C, and the sample's qkv rows.
template <typename KT>
struct QueryTileBlock {
  int qt, b, h, g, W, C;
  const KT* rows;  // (T,W)
  __device__ QueryTileBlock(const KT* qkv, int T, int NH, int NKV, int HD)
      : qt(tiles(T) - 1 - static_cast<int>(blockIdx.x)), b(blockIdx.y / NH), h(blockIdx.y % NH), g(h / (NH / NKV)),
        W((NH + 2 * NKV) * HD), C(NH * HD), rows(qkv + static_cast<long>(b) * T * W) {}
  // The whole block: key tile kt of the head's key/value group into K and V (kTile,D).
  template <int D>
  __device__ void load_key_values(KT* K, KT* V, int kt, int T, int NKV, int HD) const {
    load_tile<KT, D>(K, rows + C + g * HD, W, kt * kTile, T, HD);
    load_tile<KT, D>(V, rows + C + NKV * HD + g * HD, W, kt * kTile, T, HD);
  }
};

// ---- forward: grid (query tiles, B*NH).
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) flash_forward_kernel(KT* out /*(B,T,NH*HD)*/, float* lse /*(B,NH,T)*/,
                                                                       const KT* qkv /*(B,T,W)*/, int T, int NH, int NKV, int HD,
                                                                       float scale_log2) {
  constexpr int S = stages(sizeof(KT));
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock<KT> at(qkv, T, NH, NKV, HD);
  const int qt = at.qt, b = at.b, h = at.h, g = at.g, W = at.W, C = at.C;
  const KT* rows = at.rows;
  KT* Qs = reinterpret_cast<KT*>(smem);  // (kTile,D)
  KT* Kb = Qs + kTile * D;               // S x (kTile,D)
  KT* Vb = Kb + S * kTile * D;           // S x (kTile,D)
  float* Sc = reinterpret_cast<float*>(Vb + S * kTile * D);  // (kTile,kTile) scores
  float* O = Sc + kTile * kTile;                             // (kTile,D) unnormalised output
  float* ms = O + kTile * D;                                 // (kTile) running maximum (log2 units)
  float* ls = ms + kTile;                                    // (kTile) running sum
  unsigned char* next = reinterpret_cast<unsigned char*>(ls + kTile);
  KT* P = score_copy<KT>(Sc, next);  // (kTile,kTile) probabilities, as the product reads them
  const int lane = threadIdx.x % 32, r0 = (threadIdx.x / 32) * kWarpRows, q0 = qt * kTile;

  load_tile<KT, D>(Qs, rows + h * HD, W, q0, T, HD);
  for (int e = threadIdx.x; e < kTile * D; e += kBlockThreads) O[e] = 0.0f;
  if (threadIdx.x < kTile) ms[threadIdx.x] = -INFINITY, ls[threadIdx.x] = 0.0f;
  // Two lanes per row of the warp's 16: lane 2i + half takes columns [32 half, 32 half + 32) of row i,
  // visited from a lane-dependent start so that the 32 lanes hit 32 different banks.
  const int mine = r0 + lane / 2, half = lane % 2, q = q0 + mine;
  walk_tiles<S>(
      key_tiles_seen(qt, T),
      [&](int kt, int buf) { at.template load_key_values<D>(Kb + buf * kTile * D, Vb + buf * kTile * D, kt, T, NKV, HD); },
      [&](int kt, int buf) {
        warp_product<KT, kTile, true, false>(Sc + r0 * kTile, kTile, Qs + r0 * D, D, Kb + buf * kTile * D, D, D);  // S = Q K^T
        const float* srow = Sc + mine * kTile + half * 32;
        KT* prow = P + mine * kTile + half * 32;
        const int k0 = kt * kTile + half * 32;
        float mx = -INFINITY;
        for (int j = 0; j < 32; ++j) {
          const int c = (j + lane) % 32;
          if (visible(q, k0 + c, T)) mx = fmaxf(mx, srow[c] * scale_log2);
        }
        mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
        const float m_old = ms[mine], m_new = fmaxf(m_old, mx);
        const float mu = m_new == -INFINITY ? 0.0f : m_new;  // a row past T sees no key: all zeros
        float sum = 0.0f;
        for (int j = 0; j < 32; ++j) {
          const int c = (j + lane) % 32;
          const float p = visible(q, k0 + c, T) ? exp2f(srow[c] * scale_log2 - mu) : 0.0f;
          sum += p;
          prow[c] = st<KT>(p);
        }
        sum += __shfl_xor_sync(kFull, sum, 1);
        const float alpha = exp2f(m_old - mu);
        float* orow = O + mine * D + half * (D / 2);
        for (int j = 0; j < D / 2; ++j) orow[(j + lane) % (D / 2)] *= alpha;
        if (half == 0) ms[mine] = m_new, ls[mine] = ls[mine] * alpha + sum;
        __syncwarp();
        WarpAcc<KT, D> o(O + r0 * D, D);  // O += P V
        o.load();
        o.template mma<true, true>(P + r0 * kTile, kTile, Vb + buf * kTile * D, D, kTile);
        o.store();
      });
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, qr = q0 + r;
    if (qr >= T) break;
    const float l = ls[r], inv = 1.0f / l;
    for (int d = lane; d < HD; d += 32) out[(static_cast<long>(b) * T + qr) * C + h * HD + d] = st<KT>(O[r * D + d] * inv);
    if (lane == 0) lse[(static_cast<long>(b) * NH + h) * T + qr] = (ms[r] + log2f(l)) / kLog2e;
  }
}

// ---- backward, 1: Dsum[b,h,t] = rowsum(dout * out) over the head's HD columns; a warp per row and head.
template <typename KT>
__global__ void row_dot_kernel(float* Dsum /*(B,NH,T)*/, const KT* dout /*(B,T,C)*/, const KT* out /*(B,T,C)*/, int B, int T, int NH,
                               int HD) {
  const long w = (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (w >= static_cast<long>(B) * T * NH) return;
  const int h = static_cast<int>(w % NH);
  const long bt = w / NH;
  const KT* a = dout + bt * NH * HD + h * HD;
  const KT* o = out + bt * NH * HD + h * HD;
  float s = 0.0f;
  for (int d = threadIdx.x % 32; d < HD; d += 32) s += ld(a[d]) * ld(o[d]);
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) Dsum[(bt / T * NH + h) * T + bt % T] = s;
}

// The probabilities and score gradients of the warp's rows of one (query tile, key tile) pair from the
// fp32 scores (in Pf) and dP (in dPf): P = exp(S*scale - lse), dS = P (dP - Dsum) scale, written to the
// element tiles Pe (may be null) and dSe. Lane c takes columns c and c + 32 of each row.
template <typename KT>
__device__ void probabilities_and_gradients(KT* Pe, KT* dSe, const float* Pf, const float* dPf, const float* lse, const float* Dsum,
                                            int r0, int q0, int k0, int T, float scale, float scale_log2) {
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, q = q0 + r;
    const float lse2 = lse[r] * kLog2e;
    for (int c = lane; c < kTile; c += 32) {
      const float p = visible(q, k0 + c, T) ? exp2f(Pf[r * kTile + c] * scale_log2 - lse2) : 0.0f;
      const float ds = p * (dPf[r * kTile + c] - Dsum[r]) * scale;
      if (Pe) Pe[r * kTile + c] = st<KT>(p);
      dSe[r * kTile + c] = st<KT>(ds);
    }
  }
  __syncwarp();
}

// Writes a warp's 16 rows of an fp32 (kTile, D) tile as KT into rows of global memory (row stride ld).
template <typename KT, int D>
__device__ void store_rows(KT* dst, long ld, const float* tile, int r0, int first_row, int T, int HD) {
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i;
    if (first_row + r >= T) break;
    for (int d = lane; d < HD; d += 32) dst[static_cast<long>(first_row + r) * ld + d] = st<KT>(tile[r * D + d]);
  }
}

// ---- backward, 2: dK and dV of one key tile of one key/value group: grid (key tiles, B*NKV), the
// heaviest (first) key tiles first. Sums over the group's query heads and the query tiles at or below it.
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) flash_backward_dkv_kernel(KT* dqkv /*(B,T,W)*/, const KT* dout /*(B,T,C)*/,
                                                                            const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                                            const KT* qkv /*(B,T,W)*/, int T, int NH, int NKV, int HD,
                                                                            float scale, float scale_log2) {
  constexpr int S = stages(sizeof(KT));
  extern __shared__ __align__(128) unsigned char smem[];
  const int kt = blockIdx.x, b = blockIdx.y / NKV, g = blockIdx.y % NKV, group = NH / NKV;
  const int W = (NH + 2 * NKV) * HD, C = NH * HD;
  const KT* rows = qkv + static_cast<long>(b) * T * W;
  KT* Ks = reinterpret_cast<KT*>(smem);  // (kTile,D)
  KT* Vs = Ks + kTile * D;               // (kTile,D)
  KT* Qb = Vs + kTile * D;               // S x (kTile,D)
  KT* dOb = Qb + S * kTile * D;          // S x (kTile,D)
  float* Pf = reinterpret_cast<float*>(dOb + S * kTile * D);  // (kTile,kTile) scores, query rows x keys
  float* dPf = Pf + kTile * kTile;                            // (kTile,kTile)
  float* lse_b = dPf + kTile * kTile;                         // S x (kTile)
  float* D_b = lse_b + S * kTile;                             // S x (kTile)
  unsigned char* next = reinterpret_cast<unsigned char*>(D_b + S * kTile);
  KT* Pe = score_copy<KT>(Pf, next);
  KT* dSe = score_copy<KT>(dPf, next);
  // fp32: the accumulators after the copies; bf16: registers, staged at the end in the Q/dO buffers.
  float* dK = std::is_same_v<KT, float> ? reinterpret_cast<float*>(next) : reinterpret_cast<float*>(Qb);  // (kTile,D)
  float* dV = dK + kTile * D;                                                                               // (kTile,D)
  const int r0 = (threadIdx.x / 32) * kWarpRows, k0 = kt * kTile;
  const int query_tiles = tiles(T) - first_query_tile(kt);

  load_tile<KT, D>(Ks, rows + C + g * HD, W, k0, T, HD);
  load_tile<KT, D>(Vs, rows + C + NKV * HD + g * HD, W, k0, T, HD);
  WarpAcc<KT, D> dk(dK + r0 * D, D), dv(dV + r0 * D, D);  // the warp's 16 key rows
  dk.zero();
  dv.zero();
  // Step i: query head g*group + i / query_tiles, query tile first_query_tile(kt) + i % query_tiles.
  auto head_of = [&](int i) { return g * group + i / query_tiles; };
  auto tile_of = [&](int i) { return first_query_tile(kt) + i % query_tiles; };
  walk_tiles<S>(
      group * query_tiles,
      [&](int i, int buf) {
        const int h = head_of(i), q0 = tile_of(i) * kTile;
        const long stats = (static_cast<long>(b) * NH + h) * T;
        load_tile<KT, D>(Qb + buf * kTile * D, rows + h * HD, W, q0, T, HD);
        load_tile<KT, D>(dOb + buf * kTile * D, dout + static_cast<long>(b) * T * C + h * HD, C, q0, T, HD);
        load_rows(lse_b + buf * kTile, lse + stats, q0, T);
        load_rows(D_b + buf * kTile, Dsum + stats, q0, T);
      },
      [&](int i, int buf) {
        const KT* Qs = Qb + buf * kTile * D;
        const KT* dOs = dOb + buf * kTile * D;
        // The warp's query rows: S = Q K^T, dP = dO V^T, then P and dS.
        warp_product<KT, kTile, true, false>(Pf + r0 * kTile, kTile, Qs + r0 * D, D, Ks, D, D);
        warp_product<KT, kTile, true, false>(dPf + r0 * kTile, kTile, dOs + r0 * D, D, Vs, D, D);
        probabilities_and_gradients<KT>(Pe, dSe, Pf, dPf, lse_b + buf * kTile, D_b + buf * kTile, r0, tile_of(i) * kTile, k0, T, scale,
                                        scale_log2);
        __syncthreads();  // every query row's P and dS
        // The warp's key rows: dV += P^T dO, dK += dS^T Q.
        dv.template mma<false, true>(Pe + r0, kTile, dOs, D, kTile);
        dk.template mma<false, true>(dSe + r0, kTile, Qs, D, kTile);
      });
  dk.store();
  dv.store();
  KT* dst = dqkv + static_cast<long>(b) * T * W + C + g * HD;
  store_rows<KT, D>(dst, W, dK, r0, k0, T, HD);
  store_rows<KT, D>(dst + NKV * HD, W, dV, r0, k0, T, HD);
}

// ---- backward, 3: dQ of one query tile of one head: grid (query tiles, B*NH).
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) flash_backward_dq_kernel(KT* dqkv /*(B,T,W)*/, const KT* dout /*(B,T,C)*/,
                                                                           const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                                           const KT* qkv /*(B,T,W)*/, int T, int NH, int NKV, int HD,
                                                                           float scale, float scale_log2) {
  constexpr int S = stages(sizeof(KT));
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock<KT> at(qkv, T, NH, NKV, HD);
  const int qt = at.qt, b = at.b, h = at.h, g = at.g, W = at.W, C = at.C;
  const KT* rows = at.rows;
  KT* Qs = reinterpret_cast<KT*>(smem);  // (kTile,D)
  KT* dOs = Qs + kTile * D;              // (kTile,D)
  KT* Kb = dOs + kTile * D;              // S x (kTile,D)
  KT* Vb = Kb + S * kTile * D;           // S x (kTile,D)
  float* Pf = reinterpret_cast<float*>(Vb + S * kTile * D);  // (kTile,kTile)
  float* dPf = Pf + kTile * kTile;                           // (kTile,kTile)
  float* lse_s = dPf + kTile * kTile;                        // (kTile)
  float* D_s = lse_s + kTile;                                // (kTile)
  unsigned char* next = reinterpret_cast<unsigned char*>(D_s + kTile);
  KT* dSe = score_copy<KT>(dPf, next);
  float* dQ = std::is_same_v<KT, float> ? reinterpret_cast<float*>(next) : reinterpret_cast<float*>(Kb);  // (kTile,D)
  const int r0 = (threadIdx.x / 32) * kWarpRows, q0 = qt * kTile;
  const long stats = (static_cast<long>(b) * NH + h) * T;

  load_tile<KT, D>(Qs, rows + h * HD, W, q0, T, HD);
  load_tile<KT, D>(dOs, dout + static_cast<long>(b) * T * C + h * HD, C, q0, T, HD);
  load_rows(lse_s, lse + stats, q0, T);
  load_rows(D_s, Dsum + stats, q0, T);
  WarpAcc<KT, D> dq(dQ + r0 * D, D);
  dq.zero();
  walk_tiles<S>(
      key_tiles_seen(qt, T),
      [&](int kt, int buf) { at.template load_key_values<D>(Kb + buf * kTile * D, Vb + buf * kTile * D, kt, T, NKV, HD); },
      [&](int kt, int buf) {
        const KT* Ks = Kb + buf * kTile * D;
        warp_product<KT, kTile, true, false>(Pf + r0 * kTile, kTile, Qs + r0 * D, D, Ks, D, D);
        warp_product<KT, kTile, true, false>(dPf + r0 * kTile, kTile, dOs + r0 * D, D, Vb + buf * kTile * D, D, D);
        probabilities_and_gradients<KT>(nullptr, dSe, Pf, dPf, lse_s, D_s, r0, q0, kt * kTile, T, scale, scale_log2);
        dq.template mma<true, true>(dSe + r0 * kTile, kTile, Ks, D, kTile);  // dQ += dS K
      });
  dq.store();
  store_rows<KT, D>(dqkv + static_cast<long>(b) * T * W + h * HD, W, dQ, r0, q0, T, HD);
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

template <typename KT, int D>
void forward_for(KT* out, float* lse, const KT* qkv, int B, int T, int NH, int NKV, int HD) {
  constexpr std::size_t smem = forward_smem(D, sizeof(KT));
  static const bool ready = (allow_smem(flash_forward_kernel<KT, D>, smem, "forward", HD), true);
  (void)ready;
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(HD));
  flash_forward_kernel<KT, D><<<dim3(tiles(T), B * NH), kBlockThreads, smem>>>(out, lse, qkv, T, NH, NKV, HD, scale_log2);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT, int D>
void backward_for(KT* dqkv, float* Dsum, const KT* dout, const float* lse, const KT* qkv, int B, int T, int NH, int NKV, int HD) {
  constexpr std::size_t dkv = dkv_smem(D, sizeof(KT)), dq = dq_smem(D, sizeof(KT));
  static const bool ready =
      (allow_smem(flash_backward_dkv_kernel<KT, D>, dkv, "dK/dV", HD), allow_smem(flash_backward_dq_kernel<KT, D>, dq, "dQ", HD), true);
  (void)ready;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD)), scale_log2 = kLog2e * scale;
  flash_backward_dkv_kernel<KT, D><<<dim3(tiles(T), B * NKV), kBlockThreads, dkv>>>(dqkv, dout, lse, Dsum, qkv, T, NH, NKV, HD, scale,
                                                                                    scale_log2);
  DTRAIN_LAUNCH_CHECK();
  flash_backward_dq_kernel<KT, D><<<dim3(tiles(T), B * NH), kBlockThreads, dq>>>(dqkv, dout, lse, Dsum, qkv, T, NH, NKV, HD, scale,
                                                                                 scale_log2);
  DTRAIN_LAUNCH_CHECK();
}

[[noreturn]] void head_dim_unsupported(int HD) {
  fatal("attention: head dim " + std::to_string(HD) + " is above the CUDA backend's " + std::to_string(kMaxHeadDim) +
        " (model.hidden_size / model.num_attention_heads)");
}

template <typename KT>
void forward_impl(KT* out, float* lse, const KT* qkv, int B, int T, int NH, int NKV, int HD) {
  switch (padded_head_dim(HD)) {
    case 16: return forward_for<KT, 16>(out, lse, qkv, B, T, NH, NKV, HD);
    case 32: return forward_for<KT, 32>(out, lse, qkv, B, T, NH, NKV, HD);
    case 64: return forward_for<KT, 64>(out, lse, qkv, B, T, NH, NKV, HD);
    case 128: return forward_for<KT, 128>(out, lse, qkv, B, T, NH, NKV, HD);
    default: head_dim_unsupported(HD);
  }
}

template <typename KT>
void backward_impl(KT* dqkv, float* scratch, const KT* dout, const KT* out, const float* lse, const KT* qkv, int B, int T, int NH,
                   int NKV, int HD) {
  const long rows = static_cast<long>(B) * T * NH;
  row_dot_kernel<KT><<<blocks_for(rows * 32), kThreads>>>(scratch, dout, out, B, T, NH, HD);
  DTRAIN_LAUNCH_CHECK();
  switch (padded_head_dim(HD)) {
    case 16: return backward_for<KT, 16>(dqkv, scratch, dout, lse, qkv, B, T, NH, NKV, HD);
    case 32: return backward_for<KT, 32>(dqkv, scratch, dout, lse, qkv, B, T, NH, NKV, HD);
    case 64: return backward_for<KT, 64>(dqkv, scratch, dout, lse, qkv, B, T, NH, NKV, HD);
    case 128: return backward_for<KT, 128>(dqkv, scratch, dout, lse, qkv, B, T, NH, NKV, HD);
    default: head_dim_unsupported(HD);
  }
}

}  // namespace

void attention_forward(float* out, float* lse, float*, const float* qkv, int B, int T, int NH, int NKV, int HD) {
  forward_impl(out, lse, qkv, B, T, NH, NKV, HD);
}
void attention_forward(bf16* out, float* lse, float*, const bf16* qkv, int B, int T, int NH, int NKV, int HD) {
  forward_impl(out, lse, qkv, B, T, NH, NKV, HD);
}
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* out, const float* lse, const float* qkv, int B,
                        int T, int NH, int NKV, int HD) {
  backward_impl(dqkv, scratch, dout, out, lse, qkv, B, T, NH, NKV, HD);
}
void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv, int B, int T,
                        int NH, int NKV, int HD) {
  backward_impl(dqkv, scratch, dout, out, lse, qkv, B, T, NH, NKV, HD);
}

}  // namespace dtrain::kernels::cuda
