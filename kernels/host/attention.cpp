// Host backend: causal multi-head self-attention (attention_forward, attention_backward).
// Every product is a cblas_sgemm that strides straight into the packed qkv (lda = 3*NH*HD), done in
// blocks of kBlock query rows so that only the causal lower triangle (plus the diagonal blocks) is
// computed: about half the flops of full T x T products.
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
                       computed in att, fp32 here*/, const float* qkv /*(B,T,3*NH*HD)*/, int B, int T, int NH, int HD) {
  const int C = NH * HD;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  Kokkos::parallel_for(
      "attention_forward", HostRange(0, static_cast<long>(B) * NH), KOKKOS_LAMBDA(const long bh) {
        const long b = bh / NH;
        const int h = static_cast<int>(bh % NH);
        const float* q = qkv + b * T * C3 + h * HD;   // (T,HD), row stride C3
        const float* k = q + C;                        // (T,HD), row stride C3
        const float* v = q + 2 * C;                    // (T,HD), row stride C3
        float* p = att + bh * T * T;                   // (T,T)
        float* o = out + b * T * C + h * HD;           // (T,HD), row stride C
        for (int i0 = 0; i0 < T; i0 += kBlock) {
          const int i1 = i0 + kBlock < T ? i0 + kBlock : T;
          const int bs = i1 - i0;
          // S[i0:i1, 0:i1] = scale * Q[i0:i1] K[0:i1]^T
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bs, i1, HD, scale, q + static_cast<long>(i0) * C3,
                      C3, k, C3, 0.0f, p + static_cast<long>(i0) * T, T);
          for (int i = i0; i < i1; ++i) causal_softmax_row(p + static_cast<long>(i) * T, i + 1, T);
          // O[i0:i1] = P[i0:i1, 0:i1] V[0:i1]
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, HD, i1, 1.0f, p + static_cast<long>(i0) * T, T,
                      v, C3, 0.0f, o + static_cast<long>(i0) * C, C);
        }
      });
}

void attention_backward(float* dqkv /*(B,T,3*NH*HD)*/, float* scratch /*(NH,T,T)*/, const float* dout /*(B,T,NH*HD)*/,
                        const float* qkv /*(B,T,3*NH*HD)*/, const float* att /*(B,NH,T,T)*/, int B, int T, int NH,
                        int HD) {
  const int C = NH * HD;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  // A (T,T) scratch block per head: the heads of one sample run in parallel, the samples one after another.
  for (long b = 0; b < B; ++b)
    Kokkos::parallel_for(
        "attention_backward", HostRange(0, NH), KOKKOS_LAMBDA(const long hh) {
          const int h = static_cast<int>(hh);
          const long bh = b * NH + h;
          const long base = b * T * C3 + h * HD;
          const float* q = qkv + base;                   // (T,HD), row stride C3
          const float* k = q + C;                        // (T,HD), row stride C3
          const float* v = q + 2 * C;                    // (T,HD), row stride C3
          float* dq = dqkv + base;                       // (T,HD), row stride C3
          float* dk = dq + C;                            // (T,HD), row stride C3
          float* dv = dq + 2 * C;                        // (T,HD), row stride C3
          const float* p = att + bh * T * T;             // (T,T), zero above the diagonal
          const float* dout_h = dout + b * T * C + h * HD;   // (T,HD), row stride C
          float* ds = scratch + static_cast<long>(h) * T * T;   // (T,T): dP, then dS in place
          for (int i0 = 0; i0 < T; i0 += kBlock) {
            const int i1 = i0 + kBlock < T ? i0 + kBlock : T;
            const int bs = i1 - i0;
            // dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bs, i1, HD, 1.0f, dout_h + static_cast<long>(i0) * C, C,
                        v, C3, 0.0f, ds + static_cast<long>(i0) * T, T);
            // dS = P * (dP - rowsum(P * dP)) * scale on j <= i; zero on i < j < i1.
            for (int i = i0; i < i1; ++i) {
              const float* __restrict__ pr = p + static_cast<long>(i) * T;   // (T)
              float* __restrict__ dr = ds + static_cast<long>(i) * T;         // (T)
              const int len = i + 1;
              const float dot = lane_dot(pr, dr, len);
              for (int j = 0; j < len; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
              for (int j = len; j < i1; ++j) dr[j] = 0.0f;
            }
            // dQ[i0:i1] = dS[i0:i1, 0:i1] K[0:i1]
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, HD, i1, 1.0f, ds + static_cast<long>(i0) * T, T, k,
                        C3, 0.0f, dq + static_cast<long>(i0) * C3, C3);
          }
          for (int j0 = 0; j0 < T; j0 += kBlock) {
            const int j1 = j0 + kBlock < T ? j0 + kBlock : T;
            const int bs = j1 - j0;
            const long corner = static_cast<long>(j0) * T + j0;
            // dV[j0:j1] = P[j0:T, j0:j1]^T dO[j0:T]   (P[i, j] = 0 for i < j)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bs, HD, T - j0, 1.0f, p + corner, T,
                        dout_h + static_cast<long>(j0) * C, C, 0.0f, dv + static_cast<long>(j0) * C3, C3);
            // dK[j0:j1] = dS[j0:T, j0:j1]^T Q[j0:T]
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bs, HD, T - j0, 1.0f, ds + corner, T,
                        q + static_cast<long>(j0) * C3, C3, 0.0f, dk + static_cast<long>(j0) * C3, C3);
          }
        });
}

}  // namespace dtrain::kernels::host
