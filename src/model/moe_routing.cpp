// route_tokens, expert_capacity, load_balancing_loss: the host side of MoE routing.
#include "model/moe_routing.hpp"

#include <algorithm>
#include <cmath>

namespace dtrain {

void renormalize_top_k(float* w, float* sums, long N, int K) {
  for (long t = 0; t < N; ++t) {
    float s = 0.0f;
    for (int j = 0; j < K; ++j) s += w[t * K + j];
    sums[t] = s;
    for (int j = 0; j < K; ++j) w[t * K + j] /= s;
  }
}

void renormalized_weight_grad(float* dw, const float* wn, const float* sums, long N, int K) {
  for (long t = 0; t < N; ++t) {
    float dot = 0.0f;
    for (int j = 0; j < K; ++j) dot += dw[t * K + j] * wn[t * K + j];
    for (int j = 0; j < K; ++j) dw[t * K + j] = (dw[t * K + j] - dot) / sums[t];
  }
}

long expert_capacity(double factor, long N, int K, int E) {
  return static_cast<long>(std::ceil(factor * static_cast<double>(N) * K / E));
}

MoeRouting route_tokens(const int* idx, const float* w, long N, int E, int K, long capacity) {
  MoeRouting r;
  r.pos.assign(static_cast<std::size_t>(N * K), -1);
  r.counts.assign(static_cast<std::size_t>(E), 0);
  r.rows.assign(static_cast<std::size_t>(E), 0);
  // Each expert's assignments (flat indices t*K + j), in token order.
  std::vector<std::vector<long>> of(static_cast<std::size_t>(E));
  for (long a = 0; a < N * K; ++a) of[static_cast<std::size_t>(idx[a])].push_back(a);
  for (int e = 0; e < E; ++e) {
    std::vector<long>& list = of[static_cast<std::size_t>(e)];
    r.counts[static_cast<std::size_t>(e)] = static_cast<long>(list.size());
    if (capacity >= 0 && static_cast<long>(list.size()) > capacity) {
      // Keep the most probable (stable: the earlier token first among equal probabilities), then back
      // to token order.
      std::stable_sort(list.begin(), list.end(), [&](long a, long b) { return w[a] > w[b]; });
      list.resize(static_cast<std::size_t>(capacity));
      std::sort(list.begin(), list.end());
    }
    r.rows[static_cast<std::size_t>(e)] = static_cast<long>(list.size());
    for (long a : list) {
      r.pos[static_cast<std::size_t>(a)] = static_cast<int>(r.src.size());
      r.src.push_back(static_cast<int>(a / K));
      r.row_w.push_back(w[a]);
    }
  }
  return r;
}

LoadBalanceSums::LoadBalanceSums(const float* p, const std::vector<long>& c, long N, int E)
    : probs(static_cast<std::size_t>(E), 0.0), counts(c.begin(), c.end()), tokens(N) {
  for (int e = 0; e < E; ++e)
    for (long t = 0; t < N; ++t) probs[static_cast<std::size_t>(e)] += p[t * E + e];
}

double load_balancing_loss(const LoadBalanceSums& sums, int K, double coeff, std::vector<float>* daux) {
  const std::size_t E = sums.probs.size();
  const double N = static_cast<double>(sums.tokens);
  const double scale = coeff * static_cast<double>(E) / (N * N * K);
  double loss = 0.0;
  if (daux) daux->assign(E, 0.0f);
  for (std::size_t e = 0; e < E; ++e) {
    loss += sums.probs[e] * sums.counts[e];
    if (daux) (*daux)[e] = static_cast<float>(scale * sums.counts[e]);
  }
  return scale * loss;
}

}  // namespace dtrain
