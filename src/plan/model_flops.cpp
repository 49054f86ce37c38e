// model_flops_per_token: the convention in model_flops.hpp.
#include "plan/model_flops.hpp"

namespace dtrain {

double model_flops_per_token(const Config& c) {
  const double L = c.model.num_layers, C = c.model.hidden_size, F = c.ffn_hidden(), T = c.model.seq_length,
               V = c.model.vocab_size;
  const double kv = 2.0 * C * c.model.kv_heads() * (C / c.model.num_attention_heads);  // key and value weights
  const double per_matrix = c.model.swiglu ? 3.0 : 2.0;
  // MoE blocks: the router and top-k experts' MLPs a token passes through (dropless count).
  double moe_blocks = 0;
  for (int l = 0; l < c.model.num_layers; ++l) moe_blocks += c.model.moe_layer(l) ? 1 : 0;
  const double moe = c.model.num_experts * C + c.model.moe_router_topk * per_matrix * C * c.moe_ffn_hidden();
  const double matmul_params = L * (C * C + kv + C * C) + (L - moe_blocks) * per_matrix * C * F + moe_blocks * moe + V * C;
  return 6.0 * matmul_params + 6.0 * L * T * C;
}

}  // namespace dtrain
