// The MoE router's choice for one token, shared by the host and CUDA router kernels: the K largest of
// the token's E probabilities, largest first.
#pragma once

#include "kernels/host_device.hpp"

namespace dtrain::kernels {

// idx (K): the chosen experts, w (K): their probabilities. The j-th pick is the largest probability
// not picked yet; a strict > keeps the lower expert index on ties.
DTRAIN_HOST_DEVICE inline void router_top_k(const float* p /*(E)*/, int E, int K, int* idx /*(K)*/, float* w /*(K)*/) {
  for (int j = 0; j < K; ++j) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || idx[i] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;
    }
    idx[j] = best;
    w[j] = p[best];
  }
}

}  // namespace dtrain::kernels
