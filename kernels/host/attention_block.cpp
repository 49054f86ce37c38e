// Host backend: attention of one block of query rows against one block of key/value rows
// (attention_block_forward, attention_block_backward), the pieces of ring attention under context
// parallelism. The forward merges each block into a running output and log-sum-exp (online softmax:
// the probabilities of a block are exp(score - lse) against the log-sum-exp of every key seen so far,
// and the output seen so far is rescaled by exp(lse_before - lse_after)); the backward recomputes a
// block's probabilities from the final log-sum-exp, as flash attention does, so no (T,T) probabilities
// are kept between the passes. Products are cblas_sgemm straight on the strided rows. Key/value groups
// run in parallel; the query heads of a group one after another (they add into the same dK, dV). Each
// query row sees the keys [first, last) of the block that block_visible_keys gives (causal by position, and
// from its first visible key: its document's start, its sliding window); a row that sees none leaves its
// output and log-sum-exp as they were.
#include "kernels/attention_visibility.hpp"
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtrain::kernels::host {

void attention_block_forward(float* out /*(Tq,NH*HD)*/, float* lse /*(NH,Tq)*/, float* scratch /*(NH,Tq,Tk)*/,
                             const float* q /*(Tq,qs)*/, int qs, const float* kv /*(Tk,ks)*/, int ks, int Tq, int Tk, int NH,
                             int NKV, int HD, int q_pos, int k_pos, KeyVisibility visible) {
  const int C = NH * HD, group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  Kokkos::parallel_for(
      "attention_block_forward", HostRange(0, NH), KOKKOS_LAMBDA(const long hl) {
        const int h = static_cast<int>(hl);
        const float* qh = q + h * HD;                       // (Tq,HD), row stride qs
        const float* k = kv + (h / group) * HD;             // (Tk,HD), row stride ks
        const float* v = k + NKV * HD;                      // (Tk,HD), row stride ks
        float* s = scratch + hl * Tq * Tk;                  // (Tq,Tk)
        float* o = out + h * HD;                            // (Tq,HD), row stride C
        float* l = lse + hl * Tq;                           // (Tq)
        // S = scale * Q K^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, HD, scale, qh, qs, k, ks, 0.0f, s, Tk);
        for (int i = 0; i < Tq; ++i) {
          float* __restrict__ row = s + static_cast<long>(i) * Tk;  // (Tk)
          const KeyRange r = block_visible_keys(q_pos + i, visible.first_key(i, q_pos + i), k_pos, Tk);
          if (r.first == r.last) {  // no key of this block: the running result stays
            std::fill(row, row + Tk, 0.0f);
            continue;
          }
          const int len = r.last - r.first;
          const float m = lane_max(row + r.first, len);
          const float block_lse = m + std::log(lane_sum_exp(row + r.first, m, len));
          const float before = l[i];
          const float after = before == -std::numeric_limits<float>::infinity()
                                  ? block_lse
                                  : std::max(before, block_lse) + std::log1p(std::exp(-std::fabs(before - block_lse)));
          // The running output, rescaled to the new normaliser; this block's probabilities against it.
          const float keep = before == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(before - after);
          float* __restrict__ orow = o + static_cast<long>(i) * C;  // (HD)
          for (int d = 0; d < HD; ++d) orow[d] *= keep;
          for (int j = 0; j < r.first; ++j) row[j] = 0.0f;
          for (int j = r.first; j < r.last; ++j) row[j] = fast_exp(row[j] - after);
          for (int j = r.last; j < Tk; ++j) row[j] = 0.0f;
          l[i] = after;
        }
        // O += P V
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, HD, Tk, 1.0f, s, Tk, v, ks, 1.0f, o, C);
      });
}

void attention_block_backward(float* dq /*(Tq,NH*HD)*/, float* dkv /*(Tk,dks)*/, int dks, float* scratch /*(NH,2,Tq,Tk)*/,
                              const float* dout /*(Tq,NH*HD)*/, const float* out /*(Tq,NH*HD)*/, const float* lse /*(NH,Tq)*/,
                              const float* q /*(Tq,qs)*/, int qs, const float* kv /*(Tk,ks)*/, int ks, int Tq, int Tk, int NH,
                              int NKV, int HD, int q_pos, int k_pos, KeyVisibility visible) {
  const int C = NH * HD, group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  Kokkos::parallel_for(
      "attention_block_backward", HostRange(0, NKV), KOKKOS_LAMBDA(const long g) {
        const float* k = kv + g * HD;         // (Tk,HD), row stride ks
        const float* v = k + NKV * HD;        // (Tk,HD), row stride ks
        float* dk = dkv + g * HD;             // (Tk,HD), row stride dks
        float* dv = dk + NKV * HD;            // (Tk,HD), row stride dks
        for (int h = static_cast<int>(g) * group; h < (static_cast<int>(g) + 1) * group; ++h) {
          const float* qh = q + h * HD;                                 // (Tq,HD), row stride qs
          const float* doh = dout + h * HD;                             // (Tq,HD), row stride C
          const float* oh = out + h * HD;                               // (Tq,HD), row stride C
          const float* l = lse + static_cast<long>(h) * Tq;             // (Tq)
          float* p = scratch + static_cast<long>(h) * 2 * Tq * Tk;      // (Tq,Tk) probabilities
          float* ds = p + static_cast<long>(Tq) * Tk;                   // (Tq,Tk) dP, then dS
          // P = exp(scale * Q K^T - lse), masked
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, HD, scale, qh, qs, k, ks, 0.0f, p, Tk);
          // dP = dO V^T
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, HD, 1.0f, doh, C, v, ks, 0.0f, ds, Tk);
          for (int i = 0; i < Tq; ++i) {
            float* __restrict__ pr = p + static_cast<long>(i) * Tk;   // (Tk)
            float* __restrict__ dr = ds + static_cast<long>(i) * Tk;  // (Tk)
            const KeyRange r = block_visible_keys(q_pos + i, visible.first_key(i, q_pos + i), k_pos, Tk);
            // rowsum(dO * O) = rowsum(P_all * dP_all) over every key of every block
            const float dot = lane_dot(doh + static_cast<long>(i) * C, oh + static_cast<long>(i) * C, HD);
            for (int j = 0; j < r.first; ++j) pr[j] = dr[j] = 0.0f;
            for (int j = r.first; j < r.last; ++j) {
              pr[j] = fast_exp(pr[j] - l[i]);
              dr[j] = pr[j] * (dr[j] - dot) * scale;
            }
            for (int j = r.last; j < Tk; ++j) pr[j] = dr[j] = 0.0f;
          }
          // dV += P^T dO, dQ += dS K, dK += dS^T Q
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, HD, Tq, 1.0f, p, Tk, doh, C, 1.0f, dv, dks);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, HD, Tk, 1.0f, ds, Tk, k, ks, 1.0f, dq + h * HD, C);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, HD, Tq, 1.0f, ds, Tk, qh, qs, 1.0f, dk, dks);
        }
      });
}

void copy_columns(float* out /*(N,w)*/, const float* inp /*(N,W)*/, long N, int W, int col, int w) {
  Kokkos::parallel_for(
      "copy_columns", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        std::copy(inp + i * W + col, inp + i * W + col + w, out + i * w);
      });
}

void insert_columns(float* out /*(N,W)*/, const float* inp /*(N,w)*/, long N, int W, int col, int w) {
  narrow_columns(out, inp, N, W, col, w);  // fp32 rows: the same copy
}

void narrow_columns(float* out /*(N,W)*/, const float* inp /*(N,w)*/, long N, int W, int col, int w) {
  Kokkos::parallel_for(
      "narrow_columns", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        std::copy(inp + i * w, inp + i * w + w, out + i * W + col);
      });
}

}  // namespace dtrain::kernels::host
