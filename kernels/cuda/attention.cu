// CUDA backend: causal multi-head self-attention on cuBLAS strided-batched GEMMs that read the packed
// qkv in place (a batch of NH heads per sample, row stride 3*NH*HD), with a numerically stable causal
// softmax (row maximum subtracted, a warp per row, fp32) between them. The scores are computed for the
// whole (T,T) block; the softmax writes zeros above the diagonal, so the products stay causal.
// Column-major views: a row-major (T,HD) slice with row stride ld is the (HD,T) matrix X^T.
#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Row r of (rows, T) scores, query position t = r % T: P = softmax(S[0..t]), zero after.
template <typename KT>
__global__ void causal_softmax_kernel(KT* att, long rows, int T) {
  const long r = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  KT* row = att + r * T;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < len; j += 32) m = fmaxf(m, ld(row[j]));
  m = warp_max(m);
  float s = 0.0f;
  for (int j = threadIdx.x; j < len; j += 32) s += expf(ld(row[j]) - m);
  const float inv = 1.0f / warp_sum(s);
  for (int j = threadIdx.x; j < T; j += 32) row[j] = st<KT>(j < len ? expf(ld(row[j]) - m) * inv : 0.0f);
}

// In place over (rows, T) dP: dS = P * (dP - sum_j P dP) * scale on j <= t, zero above the diagonal.
template <typename KT>
__global__ void causal_softmax_backward_kernel(KT* ds, const KT* att, long rows, int T, float scale) {
  const long r = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  KT* d = ds + r * T;
  const KT* p = att + r * T;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < len; j += 32) dot += ld(p[j]) * ld(d[j]);
  dot = warp_sum(dot);
  for (int j = threadIdx.x; j < T; j += 32) d[j] = st<KT>(j < len ? ld(p[j]) * (ld(d[j]) - dot) * scale : 0.0f);
}

template <typename KT>
void forward(KT* out /*(B,T,C)*/, KT* att /*(B,NH,T,T)*/, const KT* qkv /*(B,T,3C)*/, int B, int T, int NH, int HD) {
  const int C = NH * HD, C3 = 3 * C;
  const long TT = static_cast<long>(T) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (int b = 0; b < B; ++b) {
    const KT* q = qkv + static_cast<long>(b) * T * C3;
    // S^T (col-major) = K^T^T Q^T, i.e. row-major S = scale * Q K^T, per head.
    gemm(true, false, T, T, HD, scale, q + C, C3, HD, q, C3, HD, 0.0f, att + b * NH * TT, T, TT, NH);
  }
  const long rows = static_cast<long>(B) * NH * T;
  causal_softmax_kernel<<<blocks_for(rows, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(att, rows, T);
  DTRAIN_LAUNCH_CHECK();
  for (int b = 0; b < B; ++b) {
    const KT* v = qkv + static_cast<long>(b) * T * C3 + 2 * C;
    // O^T = V^T P^T: row-major O = P V, per head.
    gemm(false, false, HD, T, T, 1.0f, v, C3, HD, att + b * NH * TT, T, TT, 0.0f, out + static_cast<long>(b) * T * C, C, HD, NH);
  }
}

template <typename KT>
void backward(KT* dqkv, KT* scratch /*(NH,T,T)*/, const KT* dout, const KT* qkv, const KT* att, int B, int T, int NH, int HD) {
  const int C = NH * HD, C3 = 3 * C;
  const long TT = static_cast<long>(T) * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const long rows = static_cast<long>(NH) * T;
  for (int b = 0; b < B; ++b) {
    const KT* q = qkv + static_cast<long>(b) * T * C3;
    const KT* k = q + C;
    const KT* v = q + 2 * C;
    KT* dq = dqkv + static_cast<long>(b) * T * C3;
    KT* dk = dq + C;
    KT* dv = dq + 2 * C;
    const KT* p = att + b * NH * TT;
    const KT* dout_b = dout + static_cast<long>(b) * T * C;
    // dP = dO V^T
    gemm(true, false, T, T, HD, 1.0f, v, C3, HD, dout_b, C, HD, 0.0f, scratch, T, TT, NH);
    // dV = P^T dO
    gemm(false, true, HD, T, T, 1.0f, dout_b, C, HD, p, T, TT, 0.0f, dv, C3, HD, NH);
    causal_softmax_backward_kernel<<<blocks_for(rows, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(scratch, p, rows, T, scale);
    DTRAIN_LAUNCH_CHECK();
    // dQ = dS K, dK = dS^T Q
    gemm(false, false, HD, T, T, 1.0f, k, C3, HD, scratch, T, TT, 0.0f, dq, C3, HD, NH);
    gemm(false, true, HD, T, T, 1.0f, q, C3, HD, scratch, T, TT, 0.0f, dk, C3, HD, NH);
  }
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int NH, int HD) { forward(out, att, qkv, B, T, NH, HD); }
void attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int T, int NH, int HD) { forward(out, att, qkv, B, T, NH, HD); }
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int B, int T, int NH, int HD) {
  backward(dqkv, scratch, dout, qkv, att, B, T, NH, HD);
}
void attention_backward(bf16* dqkv, bf16* scratch, const bf16* dout, const bf16* qkv, const bf16* att, int B, int T, int NH, int HD) {
  backward(dqkv, scratch, dout, qkv, att, B, T, NH, HD);
}

}  // namespace dtrain::kernels::cuda
