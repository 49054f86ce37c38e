// Host backend: fused causal multi-head self-attention (attention_forward, attention_backward), the
// same algorithm as the CUDA backend's flash kernels: no (T,T) matrix in memory. Each head goes in
// blocks of kAttentionRows query rows against the keys up to the block's last row (the causal lower
// triangle plus the diagonal blocks: about half the flops of full products); the block's scores live in
// a (rows, T) tile of the scratch. Every product is a cblas_sgemm that strides straight into the packed
// qkv (lda = W = (NH+2*NKV)*HD). The forward keeps each row's log-sum-exp; the backward recomputes the
// block's probabilities from it and adds the block's share to dK and dV. With grouped-query attention
// the query heads of a group read the same key/value head; in the backward pass they run one after
// another and add their key/value gradients, while the groups run in parallel. A block's products start
// at its first row's first visible key (kernels/attention_visibility.hpp: its document's start, its
// sliding window's first key): keys wholly before it cost nothing, and each row's softmax runs over its
// own visible keys.
#include "kernels/attention_scratch.hpp"
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cblas.h>
#include <cmath>
#include <cstring>

namespace dtrain::kernels::host {

namespace {

// In place: row[0..len) = exp(row - lse), the probabilities of a row whose log-sum-exp is known.
inline void probabilities_row(float* __restrict__ row /*(len)*/, int len, float lse) {
  for (int j = 0; j < len; ++j) row[j] = fast_exp(row[j] - lse);
}

// In place: row[0..len) = softmax(row[0..len)); returns the row's log-sum-exp.
inline float softmax_row(float* __restrict__ row /*(len)*/, int len) {
  const float m = lane_max(row, len);
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= len; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float e = fast_exp(row[j + l] - m);
      row[j + l] = e;
      acc[l] += e;
    }
  for (int l = 0; j < len; ++j, ++l) {
    const float e = fast_exp(row[j] - m);
    row[j] = e;
    acc[l] += e;
  }
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  const float inv = 1.0f / sum;
  for (int k = 0; k < len; ++k) row[k] *= inv;
  return m + std::log(sum);
}

}  // namespace

void attention_forward(float* out /*(B,T,NH*HD)*/, float* lse /*(B,NH,T)*/, float* scratch, const float* qkv /*(B,T,W)*/,
                       KeyVisibility visible, int B, int T, int NH, int NKV, int HD) {
  const int C = NH * HD;
  const int W = (NH + 2 * NKV) * HD;
  const int group = NH / NKV;
  const int rows = T < kAttentionRows ? T : kAttentionRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  // The heads run in parallel (a scores tile each), the samples one after another.
  for (long b = 0; b < B; ++b)
    Kokkos::parallel_for(
        "attention_forward", HostRange(0, NH), KOKKOS_LAMBDA(const long hl) {
          const int h = static_cast<int>(hl);
          const float* q = qkv + b * T * W + h * HD;                   // (T,HD), row stride W
          const float* k = qkv + b * T * W + C + (h / group) * HD;     // (T,HD), row stride W
          const float* v = k + NKV * HD;                               // (T,HD), row stride W
          float* o = out + b * T * C + h * HD;                         // (T,HD), row stride C
          float* l = lse + (b * NH + h) * T;                           // (T)
          float* p = scratch + hl * 2 * rows * static_cast<long>(T);   // (rows,T) tile
          const KeyVisibility vis = visible.from_row(b * T);           // the sample's rows
          for (int i0 = 0; i0 < T; i0 += rows) {
            const int i1 = i0 + rows < T ? i0 + rows : T;
            const int bs = i1 - i0;
            const int lo = vis.first_key(i0, i0);  // the block's first key: its first row's (first keys grow along t)
            // S[0:bs, 0:i1-lo] = scale * Q[i0:i1] K[lo:i1]^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bs, i1 - lo, HD, scale, q + static_cast<long>(i0) * W, W,
                        k + static_cast<long>(lo) * W, W, 0.0f, p, T);
            for (int i = i0; i < i1; ++i) {
              float* row = p + static_cast<long>(i - i0) * T;
              const int first = vis.first_key(i, i) - lo;  // row i sees keys [first key, i]
              for (int j = 0; j < first; ++j) row[j] = 0.0f;
              l[i] = softmax_row(row + first, i - lo + 1 - first);
              for (int j = i - lo + 1; j < i1 - lo; ++j) row[j] = 0.0f;  // above the diagonal inside the block
            }
            // O[i0:i1] = P[0:bs, 0:i1-lo] V[lo:i1]
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, HD, i1 - lo, 1.0f, p, T, v + static_cast<long>(lo) * W, W, 0.0f,
                        o + static_cast<long>(i0) * C, C);
          }
        });
}

void attention_backward(float* dqkv /*(B,T,W)*/, float* scratch, const float* dout /*(B,T,NH*HD)*/, const float* out /*(B,T,NH*HD)*/,
                        const float* lse /*(B,NH,T)*/, const float* qkv /*(B,T,W)*/, KeyVisibility visible, int B, int T,
                        int NH, int NKV, int HD) {
  const int C = NH * HD;
  const int W = (NH + 2 * NKV) * HD;
  const int group = NH / NKV;
  const int rows = T < kAttentionRows ? T : kAttentionRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  // The key/value groups of one sample run in parallel (two tiles of the group's first head's scratch
  // each), the samples one after another.
  for (long b = 0; b < B; ++b)
    Kokkos::parallel_for(
        "attention_backward", HostRange(0, NKV), KOKKOS_LAMBDA(const long g) {
          const long row0 = b * T * W;
          const float* k = qkv + row0 + C + g * HD;      // (T,HD), row stride W
          const float* v = k + NKV * HD;                 // (T,HD), row stride W
          float* dk = dqkv + row0 + C + g * HD;          // (T,HD), row stride W
          float* dv = dk + NKV * HD;                     // (T,HD), row stride W
          float* p = scratch + g * group * 2 * rows * static_cast<long>(T);  // (rows,T): P
          float* ds = p + rows * static_cast<long>(T);                       // (rows,T): dP, then dS
          for (int t = 0; t < T; ++t) {
            std::memset(dk + static_cast<long>(t) * W, 0, sizeof(float) * HD);
            std::memset(dv + static_cast<long>(t) * W, 0, sizeof(float) * HD);
          }
          for (int h = static_cast<int>(g) * group; h < (static_cast<int>(g) + 1) * group; ++h) {
            const float* q = qkv + row0 + h * HD;                // (T,HD), row stride W
            float* dq = dqkv + row0 + h * HD;                    // (T,HD), row stride W
            const float* dout_h = dout + b * T * C + h * HD;     // (T,HD), row stride C
            const float* out_h = out + b * T * C + h * HD;       // (T,HD), row stride C
            const float* l = lse + (b * NH + h) * T;             // (T)
            const KeyVisibility vis = visible.from_row(b * T);    // the sample's rows
            for (int i0 = 0; i0 < T; i0 += rows) {
              const int i1 = i0 + rows < T ? i0 + rows : T;
              const int bs = i1 - i0;
              const int lo = vis.first_key(i0, i0);  // the block's first key (as the forward)
              const int n = i1 - lo;                   // keys of the block's products
              const float* kl = k + static_cast<long>(lo) * W;
              const float* vl = v + static_cast<long>(lo) * W;
              // P[0:bs, 0:n] = exp(scale * Q[i0:i1] K[lo:i1]^T - lse), zero outside each row's keys
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bs, n, HD, scale, q + static_cast<long>(i0) * W, W, kl, W, 0.0f, p, T);
              // dP[0:bs, 0:n] = dO[i0:i1] V[lo:i1]^T
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bs, n, HD, 1.0f, dout_h + static_cast<long>(i0) * C, C, vl, W, 0.0f,
                          ds, T);
              // dS = P * (dP - rowsum(dO * O)) * scale on the keys row i sees, [first key, i]; zero elsewhere.
              for (int i = i0; i < i1; ++i) {
                float* __restrict__ pr = p + static_cast<long>(i - i0) * T;   // (T)
                float* __restrict__ dr = ds + static_cast<long>(i - i0) * T;  // (T)
                const int first = vis.first_key(i, i) - lo, len = i - lo + 1;
                for (int j = 0; j < first; ++j) pr[j] = dr[j] = 0.0f;
                probabilities_row(pr + first, len - first, l[i]);
                const float dot = lane_dot(dout_h + static_cast<long>(i) * C, out_h + static_cast<long>(i) * C, HD);
                for (int j = first; j < len; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
                for (int j = len; j < n; ++j) pr[j] = dr[j] = 0.0f;
              }
              // dQ[i0:i1] = dS[0:bs, 0:n] K[lo:i1]
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, HD, n, 1.0f, ds, T, kl, W, 0.0f, dq + static_cast<long>(i0) * W, W);
              // dV[lo:i1] += P[0:bs, 0:n]^T dO[i0:i1];  dK[lo:i1] += dS[0:bs, 0:n]^T Q[i0:i1]
              cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, HD, bs, 1.0f, p, T, dout_h + static_cast<long>(i0) * C, C, 1.0f,
                          dv + static_cast<long>(lo) * W, W);
              cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, HD, bs, 1.0f, ds, T, q + static_cast<long>(i0) * W, W, 1.0f,
                          dk + static_cast<long>(lo) * W, W);
            }
          }
        });
}

}  // namespace dtrain::kernels::host
