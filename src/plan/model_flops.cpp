// model_flops_per_token: the convention in model_flops.hpp.
#include "plan/model_flops.hpp"

namespace dtrain {

double model_flops_per_token(const Config& c) {
  const double L = c.model.num_layers, C = c.model.hidden_size, F = c.ffn_hidden(), T = c.model.seq_length,
               V = c.model.vocab_size;
  const double matmul_params = L * (3 * C * C + C * C + 2 * C * F) + V * C;
  return 6.0 * matmul_params + 6.0 * L * T * C;
}

}  // namespace dtrain
