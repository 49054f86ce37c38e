// The routing of one micro-batch through a MoE layer, decided on the host from the router's top-k
// choices: which assignments (token t, choice j) each expert takes, in which order its rows lie, and
// what the load-balancing loss sees. Pure and deterministic (no device, no MPI).
//
// Rows are expert-major: expert 0's assignments first, then expert 1's, ...; within an expert in token
// order. With a capacity, an expert keeps its `capacity` most probable assignments (Megatron's "probs"
// drop policy; ties: the earlier token) and drops the rest; a dropped assignment has no row.
#pragma once
#include <vector>

namespace dtrain {

struct MoeRouting {
  std::vector<int> pos;       // (N,K) row of assignment (t,j), -1 when dropped
  std::vector<int> src;       // (R) token of each row
  std::vector<float> row_w;   // (R) routing weight (the top-k probability) of each row
  std::vector<long> counts;   // (E) assignments per expert before dropping
  std::vector<long> rows;     // (E) rows per expert after dropping; R = their sum
  long total_rows() const { return static_cast<long>(src.size()); }
};

// Renormalised top-k (model.moe_router_pre_softmax = false): w (N,K), each token's top-k probabilities,
// divided in place by their sum, which goes to sums (N); the softmax of the top-k logits.
void renormalize_top_k(float* w, float* sums, long N, int K);
// Its backward: dw (N,K), the gradient of the renormalised weights wn (N,K), becomes in place that of the
// probabilities they came from: (dw_j - sum_k dw_k wn_k) / sum.
void renormalized_weight_grad(float* dw, const float* wn, const float* sums, long N, int K);

// Megatron's capacity: ceil(factor * N * K / E) assignments per expert.
long expert_capacity(double factor, long N, int K, int E);

// idx, w (N,K): the router's choices and their probabilities; capacity < 0 = dropless.
MoeRouting route_tokens(const int* idx, const float* w, long N, int E, int K, long capacity);

// The load-balancing loss's sums over one micro-batch: per expert P_e = sum_t probs[t,e] (token order)
// and the assignments counted before dropping, and the tokens. Context parallelism splits a micro-
// batch over ranks: each holds the sums of its tokens, added over the cp group into the whole's.
struct LoadBalanceSums {
  std::vector<double> probs, counts;  // (E), (E)
  long tokens = 0;
  LoadBalanceSums(const float* probs /*(N,E)*/, const std::vector<long>& counts, long N, int E);
};

// Switch/GShard load-balancing loss of one micro-batch: coeff * E / (N^2 K) * sum_e P_e * counts_e;
// and its gradient with respect to every probs[t,e] of expert e, coeff * E / (N^2 K) * counts_e (the
// counts are not differentiated), into daux (E).
double load_balancing_loss(const LoadBalanceSums& sums, int K, double coeff, std::vector<float>* daux);

}  // namespace dtrain
