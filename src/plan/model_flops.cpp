// model_flops_per_token: the convention in model_flops.hpp.
#include "plan/model_flops.hpp"

namespace dtrain {

double model_flops_per_token(const Config& c) {
  const double L = c.model.num_layers, C = c.model.hidden_size, F = c.ffn_hidden(), T = c.model.seq_length,
               V = c.model.vocab_size;
  const double kv = 2.0 * C * c.model.kv_heads() * (C / c.model.num_attention_heads);  // key and value weights
  const double mlp = (c.model.swiglu ? 3.0 : 2.0) * C * F;
  const double matmul_params = L * (C * C + kv + C * C + mlp) + V * C;
  return 6.0 * matmul_params + 6.0 * L * T * C;
}

}  // namespace dtrain
