// model_flops_per_token: the convention in model_flops.hpp, counted over the whole model's tensor table
// (the one description of the parameters).
#include "plan/model_flops.hpp"

#include "plan/tensor_table.hpp"

namespace dtrain {

double model_flops_per_token(const Config& c) {
  const ModelShape shape = ModelShape::from(c);
  const TensorTable whole(shape, stage_part(PipelineSplit{shape.num_layers}, 0), 1, 0);
  // The weights a token multiplies: the decayed tensors (every matrix: the linear layers, the router,
  // the LM head) except the tables it only looks up (wpe; wte when the head is lm_head); an expert's
  // tensors at topk/E of their size (dropless: a token passes through topk of the E experts).
  double matmul_params = 0;
  for (const TensorSpec& t : whole.tensors()) {
    if (!t.weight_decay || t.name == "wpe" || (t.name == "wte" && !shape.tied)) continue;
    matmul_params += static_cast<double>(t.numel) * (t.expert ? static_cast<double>(shape.topk) / shape.experts : 1.0);
  }
  // Attention: QK^T and PV, forward and backward (3 x 2 x 2 flops), over the keys each row sees.
  return 6.0 * matmul_params + 12.0 * shape.num_layers * shape.mean_visible_keys() * shape.heads * shape.head_dim();
}

}  // namespace dtrain
