// The FLOP count behind MFU (model FLOPs utilisation), per token of a training step (forward +
// backward):
//   6 x (the parameters used in matrix multiplies, from the whole model's tensor table: per layer C^2 (queries) + 2C*G*HD (keys and values; G*HD = C
//   without grouped-query attention) + C^2 (output projection) + 2CF (3CF with SwiGLU), plus the V x C LM head;
//   a MoE block instead of 2CF: the router E*C and the top-k experts a token passes through, k x 2CF'
//   (3CF' with SwiGLU), F' = moe_ffn_hidden_size, counted without dropping)
//   + 12 x layers x K x NH x HD (= C without model.kv_channels) for attention (QK^T and attention-times-V) over the K keys a row sees on
//     average: T/2 for the causal half (a causal model needs only the lower triangle; the kernels skip
//     the key tiles above it), fewer with a sliding window W (ModelShape::mean_visible_keys: the
//     causal triangle less the one wholly outside the windows, (T^2 - (T-W)^2) / 2T), so 6 x layers x T x C
//     without a window.
// Recomputation and the optimizer are not counted (model FLOPs, not hardware FLOPs). With this count
// and a peak measured on all cores of each node, MFU cannot exceed 100%.
#pragma once
#include "config/config.hpp"

namespace dtrain {

double model_flops_per_token(const Config& cfg);

}  // namespace dtrain
