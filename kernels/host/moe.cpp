// Host backend: the mixture-of-experts router (softmax, top-k and their backward) and the row
// movements between token order and expert-major order (gather with a weight, weighted combine, the
// per-assignment dot products of the routing weights' gradient). Every row is one iteration with a
// fixed order inside it, so results do not depend on threading.
#include <cmath>

#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"
#include "kernels/router_top_k.hpp"

namespace dtrain::kernels::host {

void moe_router_forward(float* probs, int* idx, float* w, const float* logits, long N, int E, int K) {
  Kokkos::parallel_for(
      "moe_router_forward", HostRange(0, N), KOKKOS_LAMBDA(const long t) {
        const float* __restrict__ x = logits + t * E;  // (E)
        float* __restrict__ p = probs + t * E;         // (E)
        float mx = x[0];
        for (int e = 1; e < E; ++e) mx = x[e] > mx || x[e] != x[e] ? x[e] : mx;
        float sum = 0.0f;
        for (int e = 0; e < E; ++e) sum += (p[e] = std::exp(x[e] - mx));
        for (int e = 0; e < E; ++e) p[e] /= sum;
        router_top_k(p, E, K, idx + t * K, w + t * K);
      });
}

void moe_router_backward(float* dlogits, const float* probs, const int* idx, const float* dw, const float* daux, long N, int E,
                         int K) {
  Kokkos::parallel_for(
      "moe_router_backward", HostRange(0, N), KOKKOS_LAMBDA(const long t) {
        const float* __restrict__ p = probs + t * E;  // (E)
        float* __restrict__ d = dlogits + t * E;       // (E): dprobs first, then dlogits
        for (int e = 0; e < E; ++e) d[e] = daux ? daux[e] : 0.0f;
        for (int j = 0; j < K; ++j) d[idx[t * K + j]] += dw[t * K + j];
        float dot = 0.0f;
        for (int e = 0; e < E; ++e) dot += p[e] * d[e];
        for (int e = 0; e < E; ++e) d[e] = p[e] * (d[e] - dot);
      });
}

void moe_gather_rows(float* out, const float* inp, const int* src, const float* scale, long R, int C) {
  Kokkos::parallel_for(
      "moe_gather_rows", HostRange(0, R), KOKKOS_LAMBDA(const long r) {
        const float* __restrict__ x = inp + static_cast<long>(src[r]) * C;  // (C)
        float* __restrict__ o = out + r * C;                                 // (C)
        const float s = scale ? scale[r] : 1.0f;
        for (int c = 0; c < C; ++c) o[c] = scale ? x[c] * s : x[c];
      });
}

void moe_combine(float* out, const float* rows, const int* pos, const float* w, long N, int K, int C, bool accumulate) {
  Kokkos::parallel_for(
      "moe_combine", HostRange(0, N), KOKKOS_LAMBDA(const long t) {
        float* __restrict__ o = out + t * C;  // (C)
        if (!accumulate)
          for (int c = 0; c < C; ++c) o[c] = 0.0f;
        for (int j = 0; j < K; ++j) {
          const int r = pos[t * K + j];
          if (r < 0) continue;
          const float* __restrict__ y = rows + static_cast<long>(r) * C;  // (C)
          const float s = w ? w[t * K + j] : 1.0f;
          for (int c = 0; c < C; ++c) o[c] += w ? s * y[c] : y[c];
        }
      });
}

void moe_row_dots(float* dw, const float* dy, const float* rows, const int* pos, long N, int K, int C) {
  Kokkos::parallel_for(
      "moe_row_dots", HostRange(0, N * K), KOKKOS_LAMBDA(const long i) {
        const int r = pos[i];
        float acc = 0.0f;
        if (r >= 0) {
          const float* __restrict__ g = dy + (i / K) * C;                  // (C)
          const float* __restrict__ y = rows + static_cast<long>(r) * C;  // (C)
          for (int c = 0; c < C; ++c) acc += g[c] * y[c];
        }
        dw[i] = acc;
      });
}

}  // namespace dtrain::kernels::host
