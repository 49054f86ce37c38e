// Host backend: token + position embedding (embedding_forward, embedding_backward).
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {

void embedding_forward(float* out /*(B,T,C)*/, const int* tokens /*(B,T)*/, const float* wte /*(V,C)*/,
                       const float* wpe /*(T,C) or (P,C)*/, const int* positions /*(B,T) or null*/, int vocab_start, int B, int T,
                       int C, int V) {
  const long rows = static_cast<long>(B) * T;
  Kokkos::parallel_for(
      "embedding_forward", HostRange(0, rows), KOKKOS_LAMBDA(const long r) {
        float* __restrict__ o = out + r * C;                   // (C)
        const int row = tokens[r] - vocab_start;
        const bool here = row >= 0 && row < V;
        const float* __restrict__ e = wte + static_cast<long>(here ? row : 0) * C;   // (C)
        const long at = positions ? positions[r] : r % T;
        const float* __restrict__ p = wpe ? wpe + at * C : nullptr;  // (C)
        if (here && p) {
          for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
        } else if (here) {
          for (int c = 0; c < C; ++c) o[c] = e[c];
        } else if (p) {
          for (int c = 0; c < C; ++c) o[c] = p[c];
        } else {
          for (int c = 0; c < C; ++c) o[c] = 0.0f;
        }
      });
}

void embedding_backward(float* dwte /*(V,C)*/, float* dwpe /*(T,C) or (P,C) or null*/, const float* dout /*(B,T,C)*/,
                        const int* tokens /*(B,T)*/, const int* positions /*(B,T) or null*/, int vocab_start, int B, int T, int C, int V,
                        int) {
  // dwte: tokens repeat, so several rows of dout land on one row of dwte. Done in token order by a plain
  // loop: race-free and bit-reproducible whatever the execution space.
  const long rows = static_cast<long>(B) * T;
  for (long r = 0; r < rows; ++r) {
    const int row = tokens[r] - vocab_start;
    if (row < 0 || row >= V) continue;
    float* __restrict__ g = dwte + static_cast<long>(row) * C;   // (C)
    const float* __restrict__ d = dout + r * C;                  // (C)
    for (int c = 0; c < C; ++c) g[c] += d[c];
  }
  if (!dwpe) return;
  if (positions) {  // positions repeat within a sample (packed documents): rows in (b, t) order, as dwte's
    for (long r = 0; r < rows; ++r) {
      float* __restrict__ g = dwpe + static_cast<long>(positions[r]) * C;  // (C)
      const float* __restrict__ d = dout + r * C;                           // (C)
      for (int c = 0; c < C; ++c) g[c] += d[c];
    }
    return;
  }
  // dwpe: position t owns row t; the sum over b runs in b order.
  Kokkos::parallel_for(
      "embedding_backward_wpe", HostRange(0, T), KOKKOS_LAMBDA(const long t) {
        float* __restrict__ g = dwpe + t * C;   // (C)
        for (int b = 0; b < B; ++b) {
          const float* __restrict__ d = dout + (static_cast<long>(b) * T + t) * C;   // (C)
          for (int c = 0; c < C; ++c) g[c] += d[c];
        }
      });
}

}  // namespace dtrain::kernels::host
