// CUDA backend: causal multi-head self-attention on cuBLAS strided-batched GEMMs that read the packed
// qkv in place (a batch of NH heads per sample, row stride 3*NH*HD), with a numerically stable causal
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

template <typename KT>
void forward(KT* out /*(B,T,C)*/, KT* att /*(B,NH,T,T)*/, float* scratch /*(NH,T,T)*/, const KT* qkv /*(B,T,3C)*/, int B, int T,
             int NH, int HD) {
  const int C = NH * HD, C3 = 3 * C;
  const long TT = static_cast<long>(T) * T, rows = static_cast<long>(NH) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (int b = 0; b < B; ++b) {
    const KT* q = qkv + static_cast<long>(b) * T * C3;
    const KT* v = q + 2 * C;
    KT* p = att + b * NH * TT;
    // S^T (col-major) = K^T^T Q^T, i.e. row-major S = scale * Q K^T, per head, in fp32.
    gemm(true, false, T, T, HD, scale, q + C, C3, HD, q, C3, HD, 0.0f, scratch, T, TT, NH);
    causal_softmax_kernel<<<blocks_for(rows, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(p, scratch, rows, T);
    DTRAIN_LAUNCH_CHECK();
    // O^T = V^T P^T: row-major O = P V, per head.
    gemm(false, false, HD, T, T, 1.0f, v, C3, HD, p, T, TT, 0.0f, out + static_cast<long>(b) * T * C, C, HD, NH);
  }
}

template <typename KT>
void backward(KT* dqkv, float* scratch /*(NH,T,T)*/, const KT* dout, const KT* qkv, const KT* att, int B, int T, int NH, int HD) {
  const int C = NH * HD, C3 = 3 * C;
  const long TT = static_cast<long>(T) * T, rows = static_cast<long>(NH) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  // dS is stored as KT at the start of each fp32 row: its row stride and head stride in KT elements.
  const int widen = static_cast<int>(sizeof(float) / sizeof(KT));
  const KT* ds = reinterpret_cast<const KT*>(scratch);
  for (int b = 0; b < B; ++b) {
    const KT* q = qkv + static_cast<long>(b) * T * C3;
    const KT* k = q + C;
    const KT* v = q + 2 * C;
    KT* dq = dqkv + static_cast<long>(b) * T * C3;
    KT* dk = dq + C;
    KT* dv = dq + 2 * C;
    const KT* p = att + b * NH * TT;
    const KT* dout_b = dout + static_cast<long>(b) * T * C;
    // dP = dO V^T (fp32)
    gemm(true, false, T, T, HD, 1.0f, v, C3, HD, dout_b, C, HD, 0.0f, scratch, T, TT, NH);
    // dV = P^T dO
    gemm(false, true, HD, T, T, 1.0f, dout_b, C, HD, p, T, TT, 0.0f, dv, C3, HD, NH);
    causal_softmax_backward_kernel<<<blocks_for(rows, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(scratch, p, rows, T, scale);
    DTRAIN_LAUNCH_CHECK();
    // dQ = dS K, dK = dS^T Q
    gemm(false, false, HD, T, T, 1.0f, k, C3, HD, ds, T * widen, TT * widen, 0.0f, dq, C3, HD, NH);
    gemm(false, true, HD, T, T, 1.0f, q, C3, HD, ds, T * widen, TT * widen, 0.0f, dk, C3, HD, NH);
  }
}

}  // namespace

void attention_forward(float* out, float* att, float* scratch, const float* qkv, int B, int T, int NH, int HD) {
  forward(out, att, scratch, qkv, B, T, NH, HD);
}
void attention_forward(bf16* out, bf16* att, float* scratch, const bf16* qkv, int B, int T, int NH, int HD) {
  forward(out, att, scratch, qkv, B, T, NH, HD);
}
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int B, int T, int NH, int HD) {
  backward(dqkv, scratch, dout, qkv, att, B, T, NH, HD);
}
void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* att, int B, int T, int NH, int HD) {
  backward(dqkv, scratch, dout, qkv, att, B, T, NH, HD);
}

}  // namespace dtrain::kernels::cuda
