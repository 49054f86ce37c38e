// CUDA backend: fused causal self-attention, flash-attention style (kernels/flash_tiling.hpp holds the
// tiling). One launch covers every (sample, head): a thread block per (query tile, sample x head) in the
// forward pass keeps its query tile, walks the key tiles up to the diagonal with an online softmax
// (running maximum and sum per row, the output accumulator rescaled as the maximum grows), and writes
// the output and each row's log-sum-exp: no (T,T) matrix ever reaches device memory. The backward pass
// recomputes the probabilities from the log-sum-exp in two kernels, so that no two blocks add into the
// same gradient (no atomics: the same bits every run): one per (key tile, sample x key/value group)
// sums dK and dV over the group's query heads and the query tiles that see it, one per (query tile,
// sample x head) sums dQ over the key tiles it sees. Products run on tensor cores (WMMA 16x16x16, bf16
// operands, fp32 accumulation) in bf16 runs and as fp32 FMAs in fp32 runs (no TF32, so fp32 matches the
// host); the probabilities and score gradients are rounded to the storage type once, before the
// products that take them, as the host's bf16 arithmetic does not (tolerances in the GPU tests).
#include <mma.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "common/error.hpp"
#include "kernels/attention_scratch.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/flash_tiling.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

using namespace flash;
namespace wmma = nvcuda::wmma;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kBlockThreads = kWarps * 32;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One warp: C (16 x N, fp32, row-major, ldc) = (accumulate ? C : 0) + A (16 x K) B (K x N), all in
// shared memory. ARow: A(i,k) at A[i*lda + k], else at A[k*lda + i]; BRow: B(k,j) at B[k*ldb + j], else
// at B[j*ldb + k]. N and K are multiples of 16. fp32 operands: FMAs, each lane owning every 32nd output.
template <bool ARow, bool BRow>
__device__ void warp_tile_mma(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int N, int K, bool accumulate) {
  for (int e = threadIdx.x % 32; e < 16 * N; e += 32) {
    const int i = e / N, j = e % N;
    float s = accumulate ? C[i * ldc + j] : 0.0f;
    for (int k = 0; k < K; ++k) s += (ARow ? A[i * lda + k] : A[k * lda + i]) * (BRow ? B[k * ldb + j] : B[j * ldb + k]);
    C[i * ldc + j] = s;
  }
  __syncwarp();
}
// bf16 operands: tensor cores (WMMA fragments; the accumulator goes through C in shared memory).
template <bool ARow, bool BRow>
__device__ void warp_tile_mma(float* C, int ldc, const ::dtrain::bf16* A, int lda, const ::dtrain::bf16* B, int ldb, int N, int K,
                              bool accumulate) {
  using AL = std::conditional_t<ARow, wmma::row_major, wmma::col_major>;
  using BL = std::conditional_t<BRow, wmma::row_major, wmma::col_major>;
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(A);
  const auto* b = reinterpret_cast<const __nv_bfloat16*>(B);
  for (int n = 0; n < N; n += 16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if (accumulate)
      wmma::load_matrix_sync(acc, C + n, ldc, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, AL> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, BL> fb;
      wmma::load_matrix_sync(fa, ARow ? a + k : a + k * lda, lda);
      wmma::load_matrix_sync(fb, BRow ? b + k * ldb + n : b + n * ldb + k, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(C + n, acc, ldc, wmma::mem_row_major);
  }
  __syncwarp();
}

// The whole block: dst (kTile x D) <- rows [r0, r0 + kTile) of src (row stride ld elements), columns
// [0, HD); zeros for rows at or past T and columns at or past HD. 16-byte loads when whole rows of
// 16-byte vectors are read (HD == D and ld a multiple of the vector).
template <typename KT, int D>
__device__ void load_tile(KT* dst, const KT* src, long ld, int r0, int T, int HD) {
  constexpr int V = 16 / sizeof(KT);
  if (HD == D && ld % V == 0) {
    for (int e = threadIdx.x; e < kTile * D / V; e += kBlockThreads) {
      const int r = e / (D / V), c = (e % (D / V)) * V;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r0 + r < T) v = *reinterpret_cast<const uint4*>(src + static_cast<long>(r0 + r) * ld + c);
      *reinterpret_cast<uint4*>(dst + r * D + c) = v;
    }
    return;
  }
  for (int e = threadIdx.x; e < kTile * D; e += kBlockThreads) {
    const int r = e / D, c = e % D;
    dst[e] = (r0 + r < T && c < HD) ? src[static_cast<long>(r0 + r) * ld + c] : st<KT>(0.0f);
  }
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

// ---- forward: grid (query tiles, B*NH), the heaviest tiles (most keys) first.
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) flash_forward_kernel(KT* out /*(B,T,NH*HD)*/, float* lse /*(B,NH,T)*/,
                                                                       const KT* qkv /*(B,T,W)*/, int T, int NH, int NKV, int HD,
                                                                       float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int qt = tiles(T) - 1 - static_cast<int>(blockIdx.x);
  const int b = blockIdx.y / NH, h = blockIdx.y % NH, g = h / (NH / NKV);
  const int W = (NH + 2 * NKV) * HD, C = NH * HD;
  const KT* rows = qkv + static_cast<long>(b) * T * W;
  KT* Qs = reinterpret_cast<KT*>(smem);  // (kTile,D)
  KT* Ks = Qs + kTile * D;               // (kTile,D)
  KT* Vs = Ks + kTile * D;               // (kTile,D)
  float* S = reinterpret_cast<float*>(Vs + kTile * D);  // (kTile,kTile) scores
  float* O = S + kTile * kTile;                         // (kTile,D) unnormalised output
  float* ms = O + kTile * D;                            // (kTile) running maximum (log2 units)
  float* ls = ms + kTile;                               // (kTile) running sum
  unsigned char* next = reinterpret_cast<unsigned char*>(ls + kTile);
  KT* P = score_copy<KT>(S, next);                      // (kTile,kTile) probabilities, as the product reads them
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * kWarpRows, q0 = qt * kTile;

  load_tile<KT, D>(Qs, rows + h * HD, W, q0, T, HD);
  for (int e = threadIdx.x; e < kTile * D; e += kBlockThreads) O[e] = 0.0f;
  if (threadIdx.x < kTile) ms[threadIdx.x] = -INFINITY, ls[threadIdx.x] = 0.0f;
  for (int kt = 0; kt < key_tiles_seen(qt, T); ++kt) {
    __syncthreads();  // every warp is done with the previous key tile
    load_tile<KT, D>(Ks, rows + C + g * HD, W, kt * kTile, T, HD);
    load_tile<KT, D>(Vs, rows + C + NKV * HD + g * HD, W, kt * kTile, T, HD);
    __syncthreads();
    warp_tile_mma<true, false>(S + r0 * kTile, kTile, Qs + r0 * D, D, Ks, D, kTile, D, false);  // S = Q K^T
    for (int i = 0; i < kWarpRows; ++i) {
      const int r = r0 + i, q = q0 + r, k = kt * kTile + lane;
      const float t0 = visible(q, k, T) ? S[r * kTile + lane] * scale_log2 : -INFINITY;
      const float t1 = visible(q, k + 32, T) ? S[r * kTile + lane + 32] * scale_log2 : -INFINITY;
      const float m_old = ms[r], m_new = fmaxf(m_old, warp_max(fmaxf(t0, t1)));
      const float mu = m_new == -INFINITY ? 0.0f : m_new;  // a row past T sees no key: all zeros
      const float p0 = exp2f(t0 - mu), p1 = exp2f(t1 - mu), alpha = exp2f(m_old - mu);
      const float sum = warp_sum(p0 + p1);
      P[r * kTile + lane] = st<KT>(p0);
      P[r * kTile + lane + 32] = st<KT>(p1);
      for (int d = lane; d < D; d += 32) O[r * D + d] *= alpha;
      if (lane == 0) ms[r] = m_new, ls[r] = ls[r] * alpha + sum;
    }
    __syncwarp();
    warp_tile_mma<true, true>(O + r0 * D, D, P + r0 * kTile, kTile, Vs, D, D, kTile, true);  // O += P V
  }
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, q = q0 + r;
    if (q >= T) break;
    const float l = ls[r], inv = 1.0f / l;
    for (int d = lane; d < HD; d += 32) out[(static_cast<long>(b) * T + q) * C + h * HD + d] = st<KT>(O[r * D + d] * inv);
    if (lane == 0) lse[(static_cast<long>(b) * NH + h) * T + q] = (ms[r] + log2f(l)) / kLog2e;
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
// element tiles Pe (may be null) and dSe.
template <typename KT>
__device__ void probabilities_and_gradients(KT* Pe, KT* dSe, const float* Pf, const float* dPf, const float* lse2, const float* Dsum,
                                            int r0, int q0, int k0, int T, float scale, float scale_log2) {
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, q = q0 + r;
    for (int c = lane; c < kTile; c += 32) {
      const float p = visible(q, k0 + c, T) ? exp2f(Pf[r * kTile + c] * scale_log2 - lse2[r]) : 0.0f;
      const float ds = p * (dPf[r * kTile + c] - Dsum[r]) * scale;
      if (Pe) Pe[r * kTile + c] = st<KT>(p);
      dSe[r * kTile + c] = st<KT>(ds);
    }
  }
  __syncwarp();
}

// Row statistics of a query tile into shared memory: the log-sum-exp in log2 units and Dsum.
__device__ void load_row_stats(float* lse2, float* Ds, const float* lse, const float* Dsum, long row0, int q0, int T) {
  if (threadIdx.x < kTile) {
    const int q = q0 + static_cast<int>(threadIdx.x);
    lse2[threadIdx.x] = q < T ? lse[row0 + q] * kLog2e : 0.0f;
    Ds[threadIdx.x] = q < T ? Dsum[row0 + q] : 0.0f;
  }
}

// ---- backward, 2: dK and dV of one key tile of one key/value group: grid (key tiles, B*NKV), the
// heaviest (first) key tiles first. Sums over the group's query heads and the query tiles at or below it.
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) flash_backward_dkv_kernel(KT* dqkv /*(B,T,W)*/, const KT* dout /*(B,T,C)*/,
                                                                            const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                                            const KT* qkv /*(B,T,W)*/, int T, int NH, int NKV, int HD,
                                                                            float scale, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int kt = blockIdx.x, b = blockIdx.y / NKV, g = blockIdx.y % NKV, group = NH / NKV;
  const int W = (NH + 2 * NKV) * HD, C = NH * HD;
  const KT* rows = qkv + static_cast<long>(b) * T * W;
  KT* Ks = reinterpret_cast<KT*>(smem);  // (kTile,D)
  KT* Vs = Ks + kTile * D;               // (kTile,D)
  KT* Qs = Vs + kTile * D;               // (kTile,D)
  KT* dOs = Qs + kTile * D;              // (kTile,D)
  float* Pf = reinterpret_cast<float*>(dOs + kTile * D);  // (kTile,kTile) scores, query rows x keys
  float* dPf = Pf + kTile * kTile;                        // (kTile,kTile)
  float* dK = dPf + kTile * kTile;                        // (kTile,D) keys x dims
  float* dV = dK + kTile * D;                             // (kTile,D)
  float* lse2 = dV + kTile * D;                           // (kTile)
  float* Ds = lse2 + kTile;                               // (kTile)
  unsigned char* next = reinterpret_cast<unsigned char*>(Ds + kTile);
  KT* Pe = score_copy<KT>(Pf, next);
  KT* dSe = score_copy<KT>(dPf, next);
  const int r0 = (threadIdx.x / 32) * kWarpRows, k0 = kt * kTile;

  load_tile<KT, D>(Ks, rows + C + g * HD, W, k0, T, HD);
  load_tile<KT, D>(Vs, rows + C + NKV * HD + g * HD, W, k0, T, HD);
  for (int e = threadIdx.x; e < kTile * D; e += kBlockThreads) dK[e] = dV[e] = 0.0f;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const long row0 = (static_cast<long>(b) * NH + h) * T;
    for (int qt = first_query_tile(kt); qt < tiles(T); ++qt) {
      const int q0 = qt * kTile;
      __syncthreads();  // every warp is done with the previous query tile
      load_tile<KT, D>(Qs, rows + h * HD, W, q0, T, HD);
      load_tile<KT, D>(dOs, dout + static_cast<long>(b) * T * C + h * HD, C, q0, T, HD);
      load_row_stats(lse2, Ds, lse, Dsum, row0, q0, T);
      __syncthreads();
      // The warp's query rows: S = Q K^T, dP = dO V^T, then P and dS.
      warp_tile_mma<true, false>(Pf + r0 * kTile, kTile, Qs + r0 * D, D, Ks, D, kTile, D, false);
      warp_tile_mma<true, false>(dPf + r0 * kTile, kTile, dOs + r0 * D, D, Vs, D, kTile, D, false);
      probabilities_and_gradients<KT>(Pe, dSe, Pf, dPf, lse2, Ds, r0, q0, k0, T, scale, scale_log2);
      __syncthreads();  // every query row's P and dS
      // The warp's key rows: dV += P^T dO, dK += dS^T Q.
      warp_tile_mma<false, true>(dV + r0 * D, D, Pe + r0, kTile, dOs, D, D, kTile, true);
      warp_tile_mma<false, true>(dK + r0 * D, D, dSe + r0, kTile, Qs, D, D, kTile, true);
    }
  }
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, k = k0 + r;
    if (k >= T) break;
    KT* dk = dqkv + (static_cast<long>(b) * T + k) * W + C + g * HD;
    for (int d = lane; d < HD; d += 32) dk[d] = st<KT>(dK[r * D + d]), dk[NKV * HD + d] = st<KT>(dV[r * D + d]);
  }
}

// ---- backward, 3: dQ of one query tile of one head: grid (query tiles, B*NH), the heaviest first.
template <typename KT, int D>
__global__ void __launch_bounds__(kBlockThreads) flash_backward_dq_kernel(KT* dqkv /*(B,T,W)*/, const KT* dout /*(B,T,C)*/,
                                                                           const float* lse /*(B,NH,T)*/, const float* Dsum /*(B,NH,T)*/,
                                                                           const KT* qkv /*(B,T,W)*/, int T, int NH, int NKV, int HD,
                                                                           float scale, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int qt = tiles(T) - 1 - static_cast<int>(blockIdx.x);
  const int b = blockIdx.y / NH, h = blockIdx.y % NH, g = h / (NH / NKV);
  const int W = (NH + 2 * NKV) * HD, C = NH * HD;
  const KT* rows = qkv + static_cast<long>(b) * T * W;
  KT* Qs = reinterpret_cast<KT*>(smem);  // (kTile,D)
  KT* dOs = Qs + kTile * D;              // (kTile,D)
  KT* Ks = dOs + kTile * D;              // (kTile,D)
  KT* Vs = Ks + kTile * D;               // (kTile,D)
  float* Pf = reinterpret_cast<float*>(Vs + kTile * D);  // (kTile,kTile)
  float* dPf = Pf + kTile * kTile;                       // (kTile,kTile)
  float* dQ = dPf + kTile * kTile;                       // (kTile,D)
  float* lse2 = dQ + kTile * D;                          // (kTile)
  float* Ds = lse2 + kTile;                              // (kTile)
  unsigned char* next = reinterpret_cast<unsigned char*>(Ds + kTile);
  KT* dSe = score_copy<KT>(dPf, next);
  const int r0 = (threadIdx.x / 32) * kWarpRows, q0 = qt * kTile;

  load_tile<KT, D>(Qs, rows + h * HD, W, q0, T, HD);
  load_tile<KT, D>(dOs, dout + static_cast<long>(b) * T * C + h * HD, C, q0, T, HD);
  load_row_stats(lse2, Ds, lse, Dsum, (static_cast<long>(b) * NH + h) * T, q0, T);
  for (int e = threadIdx.x; e < kTile * D; e += kBlockThreads) dQ[e] = 0.0f;
  for (int kt = 0; kt < key_tiles_seen(qt, T); ++kt) {
    __syncthreads();  // every warp is done with the previous key tile
    load_tile<KT, D>(Ks, rows + C + g * HD, W, kt * kTile, T, HD);
    load_tile<KT, D>(Vs, rows + C + NKV * HD + g * HD, W, kt * kTile, T, HD);
    __syncthreads();
    warp_tile_mma<true, false>(Pf + r0 * kTile, kTile, Qs + r0 * D, D, Ks, D, kTile, D, false);
    warp_tile_mma<true, false>(dPf + r0 * kTile, kTile, dOs + r0 * D, D, Vs, D, kTile, D, false);
    probabilities_and_gradients<KT>(nullptr, dSe, Pf, dPf, lse2, Ds, r0, q0, kt * kTile, T, scale, scale_log2);
    warp_tile_mma<true, true>(dQ + r0 * D, D, dSe + r0 * kTile, kTile, Ks, D, D, kTile, true);  // dQ += dS K
  }
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < kWarpRows; ++i) {
    const int r = r0 + i, q = q0 + r;
    if (q >= T) break;
    KT* dq = dqkv + (static_cast<long>(b) * T + q) * W + h * HD;
    for (int d = lane; d < HD; d += 32) dq[d] = st<KT>(dQ[r * D + d]);
  }
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
void attention_forward(::dtrain::bf16* out, float* lse, float*, const ::dtrain::bf16* qkv, int B, int T, int NH, int NKV, int HD) {
  forward_impl(out, lse, qkv, B, T, NH, NKV, HD);
}
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* out, const float* lse, const float* qkv, int B,
                        int T, int NH, int NKV, int HD) {
  backward_impl(dqkv, scratch, dout, out, lse, qkv, B, T, NH, NKV, HD);
}
void attention_backward(::dtrain::bf16* dqkv, float* scratch, const ::dtrain::bf16* dout, const ::dtrain::bf16* out, const float* lse,
                        const ::dtrain::bf16* qkv, int B, int T, int NH, int NKV, int HD) {
  backward_impl(dqkv, scratch, dout, out, lse, qkv, B, T, NH, NKV, HD);
}

}  // namespace dtrain::kernels::cuda
