// CUDA backend: causal self-attention on cuBLAS strided-batched GEMMs that read the packed qkv in place
// (row stride W = (NH+2*NKV)*HD): a batch of NH heads per sample, or with grouped-query attention a
// batch of the NH/NKV query heads of each key/value head (key/value stride 0); the key/value
// gradients of a group add up head by head (beta = 1). Between the products a numerically stable causal
// softmax (row maximum subtracted, a warp per row) between them. The scores and their gradient are
// fp32 (the (NH,T,T) scratch of one sample); the probabilities and dS are rounded to KT once, as the
// next products take them. The whole (T,T) block is computed; the softmax writes zeros above the
// diagonal, so the products stay causal.
// Column-major views: a row-major (T,HD) slice with row stride ld is the (HD,T) matrix X^T.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Row r of one sample's (NH*T, T) fp32 scores, query position t = r % T: P = softmax(S[0..t]) into att
// (KT), zero after. NaN propagates (a NaN score makes the row NaN).
template <typename KT>
__global__ void causal_softmax_kernel(KT* att, const float* scores, long rows, int T) {
  const long r = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  const float* s = scores + r * T;
  KT* p = att + r * T;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < len; j += 32) m = max_keep_nan(m, s[j]);
  m = warp_max_keep_nan(m);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < len; j += 32) sum += expf(s[j] - m);
  const float inv = 1.0f / warp_sum(sum);
  for (int j = threadIdx.x; j < T; j += 32) p[j] = st<KT>(j < len ? expf(s[j] - m) * inv : 0.0f);
}

// Row r of one sample's (NH*T, T) fp32 dP, in place: dS = P * (dP - sum_j P dP) * scale on j <= t,
// zero above the diagonal, written as KT at the start of the row's own memory (the row stride stays T
// floats). For bf16 the writes overlap fp32 values of the same row that lie earlier, so the row goes
// in chunks of 32: each chunk is read into registers before any of it is written.
template <typename KT>
__global__ void causal_softmax_backward_kernel(float* scratch, const KT* att, long rows, int T, float scale) {
  const long r = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  float* dp = scratch + r * T;
  KT* ds = reinterpret_cast<KT*>(dp);
  const KT* p = att + r * T;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < len; j += 32) dot += ld(p[j]) * dp[j];
  dot = warp_sum(dot);
  for (int c0 = 0; c0 < T; c0 += 32) {
    const int j = c0 + static_cast<int>(threadIdx.x);
    const float g = j < len ? ld(p[j]) * (dp[j] - dot) * scale : 0.0f;
    __syncwarp();
    if (j < T) ds[j] = st<KT>(g);
    __syncwarp();
  }
}

// Calls fn(first query head, heads in the batch, key/value head, key/value head stride) for batches of
// query heads that read one key/value head each: all NH heads at once without grouping.
template <typename Fn>
void for_each_group(int NH, int NKV, Fn fn) {
  if (NKV == NH) {
    fn(0, NH, 0, 1);
    return;
  }
  for (int g = 0; g < NKV; ++g) fn(g * (NH / NKV), NH / NKV, g, 0);
}

template <typename KT>
void forward(KT* out /*(B,T,C)*/, KT* att /*(B,NH,T,T)*/, float* scratch /*(NH,T,T)*/, const KT* qkv /*(B,T,W)*/, int B, int T,
             int NH, int NKV, int HD) {
  const int C = NH * HD, W = (NH + 2 * NKV) * HD;
  const long TT = static_cast<long>(T) * T, rows = static_cast<long>(NH) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (int b = 0; b < B; ++b) {
    const KT* q = qkv + static_cast<long>(b) * T * W;
    const KT* k = q + C;
    const KT* v = k + NKV * HD;
    KT* p = att + b * NH * TT;
    // S^T (col-major) = K^T^T Q^T, i.e. row-major S = scale * Q K^T, per head, in fp32.
    for_each_group(NH, NKV, [&](int h0, int heads, int g, int kv_stride) {
      gemm(true, false, T, T, HD, scale, k + g * HD, W, static_cast<long>(kv_stride) * HD, q + h0 * HD, W, HD, 0.0f, scratch + h0 * TT,
           T, TT, heads);
    });
    causal_softmax_kernel<<<blocks_for(rows, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(p, scratch, rows, T);
    DTRAIN_LAUNCH_CHECK();
    // O^T = V^T P^T: row-major O = P V, per head.
    for_each_group(NH, NKV, [&](int h0, int heads, int g, int kv_stride) {
      gemm(false, false, HD, T, T, 1.0f, v + g * HD, W, static_cast<long>(kv_stride) * HD, p + h0 * TT, T, TT, 0.0f,
           out + static_cast<long>(b) * T * C + h0 * HD, C, HD, heads);
    });
  }
}

template <typename KT>
void backward(KT* dqkv, float* scratch /*(NH,T,T)*/, const KT* dout, const KT* qkv, const KT* att, int B, int T, int NH, int NKV,
              int HD) {
  const int C = NH * HD, W = (NH + 2 * NKV) * HD, group = NH / NKV;
  const long TT = static_cast<long>(T) * T, rows = static_cast<long>(NH) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  // dS is stored as KT at the start of each fp32 row: its row stride and head stride in KT elements.
  const int widen = static_cast<int>(sizeof(float) / sizeof(KT));
  const KT* ds = reinterpret_cast<const KT*>(scratch);
  for (int b = 0; b < B; ++b) {
    const KT* q = qkv + static_cast<long>(b) * T * W;
    const KT* k = q + C;
    const KT* v = k + NKV * HD;
    KT* dq = dqkv + static_cast<long>(b) * T * W;
    KT* dk = dq + C;
    KT* dv = dk + NKV * HD;
    const KT* p = att + b * NH * TT;
    const KT* dout_b = dout + static_cast<long>(b) * T * C;
    // dP = dO V^T (fp32)
    for_each_group(NH, NKV, [&](int h0, int heads, int g, int kv_stride) {
      gemm(true, false, T, T, HD, 1.0f, v + g * HD, W, static_cast<long>(kv_stride) * HD, dout_b + h0 * HD, C, HD, 0.0f,
           scratch + h0 * TT, T, TT, heads);
    });
    // dV = P^T dO, summed over the query heads of a group (one batch of NH heads without grouping)
    if (group == 1) {
      gemm(false, true, HD, T, T, 1.0f, dout_b, C, HD, p, T, TT, 0.0f, dv, W, HD, NH);
    } else {
      for (int h = 0; h < NH; ++h)
        gemm(false, true, HD, T, T, 1.0f, dout_b + h * HD, C, HD, p + h * TT, T, TT, h % group == 0 ? 0.0f : 1.0f,
             dv + (h / group) * HD, W, HD);
    }
    causal_softmax_backward_kernel<<<blocks_for(rows, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(scratch, p, rows, T, scale);
    DTRAIN_LAUNCH_CHECK();
    // dQ = dS K
    for_each_group(NH, NKV, [&](int h0, int heads, int g, int kv_stride) {
      gemm(false, false, HD, T, T, 1.0f, k + g * HD, W, static_cast<long>(kv_stride) * HD, ds + h0 * TT * widen, T * widen,
           TT * widen, 0.0f, dq + h0 * HD, W, HD, heads);
    });
    // dK = dS^T Q, summed over the query heads of a group
    if (group == 1) {
      gemm(false, true, HD, T, T, 1.0f, q, W, HD, ds, T * widen, TT * widen, 0.0f, dk, W, HD, NH);
    } else {
      for (int h = 0; h < NH; ++h)
        gemm(false, true, HD, T, T, 1.0f, q + h * HD, W, HD, ds + h * TT * widen, T * widen, TT * widen, h % group == 0 ? 0.0f : 1.0f,
             dk + (h / group) * HD, W, HD);
    }
  }
}

}  // namespace

void attention_forward(float* out, float* att, float* scratch, const float* qkv, int B, int T, int NH, int NKV, int HD) {
  forward(out, att, scratch, qkv, B, T, NH, NKV, HD);
}
void attention_forward(bf16* out, bf16* att, float* scratch, const bf16* qkv, int B, int T, int NH, int NKV, int HD) {
  forward(out, att, scratch, qkv, B, T, NH, NKV, HD);
}
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int B, int T, int NH,
                        int NKV, int HD) {
  backward(dqkv, scratch, dout, qkv, att, B, T, NH, NKV, HD);
}
void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* att, int B, int T, int NH, int NKV,
                        int HD) {
  backward(dqkv, scratch, dout, qkv, att, B, T, NH, NKV, HD);
}

}  // namespace dtrain::kernels::cuda
