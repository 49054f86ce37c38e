// Host backend: softmax cross-entropy over a vocabulary that may be split across ranks
// (xent_row_max, xent_row_sum_exp, both in xent_row_max_sum_exp, xent_target_logit, xent_loss, xent_backward). The exp is the vectorised
// fast_exp of host_math.hpp: rows can be 50k wide.
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cmath>

namespace dtrain::kernels::host {

void xent_row_max(float* row_max /*(N)*/, const float* logits /*(N,V)*/, long N, int V) {
  Kokkos::parallel_for(
      "xent_row_max", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        row_max[i] = lane_max(logits + i * V, V);
      });
}

void xent_row_sum_exp(float* row_sum /*(N)*/, const float* logits /*(N,V)*/, const float* row_max /*(N)*/, long N,
                      int V) {
  Kokkos::parallel_for(
      "xent_row_sum_exp", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        row_sum[i] = lane_sum_exp(logits + i * V, row_max[i], V);
      });
}

void xent_row_max_sum_exp(float* row_max /*(N)*/, float* row_sum /*(N)*/, const float* logits /*(N,V)*/, long N, int V) {
  xent_row_max(row_max, logits, N, V);
  xent_row_sum_exp(row_sum, logits, row_max, N, V);
}

void xent_target_logit(float* target_logit /*(N)*/, const float* logits /*(N,V)*/, const int* targets /*(N)*/,
                       int vocab_start, long N, int V) {
  Kokkos::parallel_for(
      "xent_target_logit", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        const int col = targets[i] - vocab_start;
        target_logit[i] = (col >= 0 && col < V) ? logits[i * V + col] : 0.0f;
      });
}

void xent_loss(double* loss_sum /*(1)*/, float* lse /*(N)*/, const float* row_max /*(N)*/, const float* row_sum /*(N)*/,
               const float* target_logit /*(N)*/, const float* mask /*(N) or null*/, long N) {
  double loss = 0.0;
  for (long i = 0; i < N; ++i) {
    lse[i] = row_max[i] + std::log(row_sum[i]);
    const double row = static_cast<double>(lse[i]) - target_logit[i];
    loss += mask ? row * mask[i] : row;  // a masked row's NaN still shows: NaN * 0 is NaN
  }
  if (loss_sum) *loss_sum += loss;
}

void loss_weights(float* dloss /*(N)*/, const float* mask /*(N) or null*/, float weight, long N) {
  for (long i = 0; i < N; ++i) dloss[i] = mask ? weight * mask[i] : weight;
}

void xent_backward(float* dlogits /*(N,V)*/, const float* logits /*(N,V)*/, const float* lse /*(N)*/,
                   const int* targets /*(N)*/, const float* dloss /*(N)*/, int vocab_start, long N, int V) {
  Kokkos::parallel_for(
      "xent_backward", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        // dlogits may alias logits: element v is read before it is written and nothing else reads it,
        // so there is no loop-carried dependence (ivdep), and the target logit is read up front.
        const float* x = logits + i * V;   // (V)
        float* g = dlogits + i * V;        // (V)
        const float shift = lse[i];
        const float dl = dloss[i];
        const int col = targets[i] - vocab_start;
        const bool here = col >= 0 && col < V;
        const float x_target = here ? x[col] : 0.0f;
#pragma GCC ivdep
        for (int v = 0; v < V; ++v) g[v] = fast_exp(x[v] - shift) * dl;
        // (p - 1) * dl rather than p * dl - dl: no cancellation when p is close to 1.
        if (here) g[col] = (fast_exp(x_target - shift) - 1.0f) * dl;
      });
}

}  // namespace dtrain::kernels::host
