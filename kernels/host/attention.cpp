// Host backend: causal multi-head self-attention (attention_forward, attention_backward).
// Every product is a cblas_sgemm that strides straight into the packed qkv (lda = W = (NH+2*NKV)*HD),
// done in blocks of kBlock query rows so that only the causal lower triangle (plus the diagonal blocks)
// is computed: about half the flops of full T x T products. With grouped-query attention the query
// heads of a group read the same key/value head; in the backward pass they run one after another and
// add their key/value gradients, while the groups run in parallel.
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cblas.h>
#include <cmath>

namespace dtrain::kernels::host {

namespace {

// Query rows per block. Rows [i0, i1) attend to keys [0, i1); above-diagonal entries inside the
// diagonal block are zero in att (and in dS), so the blocked products stay exact.
constexpr int kBlock = 128;

// In place: row[0..len) = softmax(row[0..len)), row[len..T) = 0.
inline void causal_softmax_row(float* __restrict__ row /*(T)*/, int len, int T) {
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
  for (int k = len; k < T; ++k) row[k] = 0.0f;
}

}  // namespace

void attention_forward(float* out /*(B,T,NH*HD)*/, float* att /*(B,NH,T,T)*/, float* /*scratch: the scores are
                       computed in att, fp32 here*/, const float* qkv /*(B,T,W)*/, int B, int T, int NH, int NKV, int HD) {
  const int C = NH * HD;
  const int W = (NH + 2 * NKV) * HD;
  const int group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  Kokkos::parallel_for(
      "attention_forward", HostRange(0, static_cast<long>(B) * NH), KOKKOS_LAMBDA(const long bh) {
        const long b = bh / NH;
        const int h = static_cast<int>(bh % NH);
        const float* q = qkv + b * T * W + h * HD;                   // (T,HD), row stride W
        const float* k = qkv + b * T * W + C + (h / group) * HD;     // (T,HD), row stride W
        const float* v = k + NKV * HD;                               // (T,HD), row stride W
        float* p = att + bh * T * T;                                 // (T,T)
        float* o = out + b * T * C + h * HD;                         // (T,HD), row stride C
        for (int i0 = 0; i0 < T; i0 += kBlock) {
          const int i1 = i0 + kBlock < T ? i0 + kBlock : T;
          const int bs = i1 - i0;
          // S[i0:i1, 0:i1] = scale * Q[i0:i1] K[0:i1]^T
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bs, i1, HD, scale, q + static_cast<long>(i0) * W,
                      W, k, W, 0.0f, p + static_cast<long>(i0) * T, T);
          for (int i = i0; i < i1; ++i) causal_softmax_row(p + static_cast<long>(i) * T, i + 1, T);
          // O[i0:i1] = P[i0:i1, 0:i1] V[0:i1]
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, HD, i1, 1.0f, p + static_cast<long>(i0) * T, T,
                      v, W, 0.0f, o + static_cast<long>(i0) * C, C);
        }
      });
}

void attention_backward(float* dqkv /*(B,T,W)*/, float* scratch /*(NH,T,T)*/, const float* dout /*(B,T,NH*HD)*/,
                        const float* qkv /*(B,T,W)*/, const float* att /*(B,NH,T,T)*/, int B, int T, int NH, int NKV,
                        int HD) {
  const int C = NH * HD;
  const int W = (NH + 2 * NKV) * HD;
  const int group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  // A (T,T) scratch block per head: the key/value groups of one sample run in parallel, the samples one
  // after another.
  for (long b = 0; b < B; ++b)
    Kokkos::parallel_for(
        "attention_backward", HostRange(0, NKV), KOKKOS_LAMBDA(const long g) {
          const long row0 = b * T * W;
          const float* k = qkv + row0 + C + g * HD;      // (T,HD), row stride W
          const float* v = k + NKV * HD;                 // (T,HD), row stride W
          float* dk = dqkv + row0 + C + g * HD;          // (T,HD), row stride W
          float* dv = dk + NKV * HD;                     // (T,HD), row stride W
          for (int h = static_cast<int>(g) * group; h < (static_cast<int>(g) + 1) * group; ++h) {
            const float beta = h == static_cast<int>(g) * group ? 0.0f : 1.0f;  // the group's first head writes dK, dV
            const long bh = b * NH + h;
            const float* q = qkv + row0 + h * HD;                // (T,HD), row stride W
            float* dq = dqkv + row0 + h * HD;                    // (T,HD), row stride W
            const float* p = att + bh * T * T;                   // (T,T), zero above the diagonal
            const float* dout_h = dout + b * T * C + h * HD;     // (T,HD), row stride C
            float* ds = scratch + static_cast<long>(h) * T * T;  // (T,T): dP, then dS in place
            for (int i0 = 0; i0 < T; i0 += kBlock) {
              const int i1 = i0 + kBlock < T ? i0 + kBlock : T;
              const int bs = i1 - i0;
              // dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bs, i1, HD, 1.0f, dout_h + static_cast<long>(i0) * C, C,
                          v, W, 0.0f, ds + static_cast<long>(i0) * T, T);
              // dS = P * (dP - rowsum(P * dP)) * scale on j <= i; zero on i < j < i1.
              for (int i = i0; i < i1; ++i) {
                const float* __restrict__ pr = p + static_cast<long>(i) * T;  // (T)
                float* __restrict__ dr = ds + static_cast<long>(i) * T;       // (T)
                const int len = i + 1;
                const float dot = lane_dot(pr, dr, len);
                for (int j = 0; j < len; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
                for (int j = len; j < i1; ++j) dr[j] = 0.0f;
              }
              // dQ[i0:i1] = dS[i0:i1, 0:i1] K[0:i1]
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, HD, i1, 1.0f, ds + static_cast<long>(i0) * T, T, k,
                          W, 0.0f, dq + static_cast<long>(i0) * W, W);
            }
            for (int j0 = 0; j0 < T; j0 += kBlock) {
              const int j1 = j0 + kBlock < T ? j0 + kBlock : T;
              const int bs = j1 - j0;
              const long corner = static_cast<long>(j0) * T + j0;
              // dV[j0:j1] (+)= P[j0:T, j0:j1]^T dO[j0:T]   (P[i, j] = 0 for i < j)
              cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bs, HD, T - j0, 1.0f, p + corner, T,
                          dout_h + static_cast<long>(j0) * C, C, beta, dv + static_cast<long>(j0) * W, W);
              // dK[j0:j1] (+)= dS[j0:T, j0:j1]^T Q[j0:T]
              cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bs, HD, T - j0, 1.0f, ds + corner, T,
                          q + static_cast<long>(j0) * W, W, beta, dk + static_cast<long>(j0) * W, W);
            }
          }
        });
}

}  // namespace dtrain::kernels::host
