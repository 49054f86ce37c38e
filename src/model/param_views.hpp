// Typed views of a rank's parameter (or gradient) arena: a pointer to every tensor of each block, the
// embedding and the head, by the tensor table's offsets (null for tensors the model does not have).
#pragma once
#include <vector>

#include "model/moe_layer.hpp"
#include "plan/rank_plan.hpp"

namespace dtrain {

// A block's tensors; the optional ones are null when the model has none (norm biases with RMSNorm,
// linear biases without add_bias_linear). qkv_w is the packed [q | k | v] weight (QKVl rows): qkv_w, or
// q_w with kv_w packed after it (grouped-query attention); likewise qkv_b.
template <typename T>
struct BlockParams {
  T *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
  MoeParams<T> moe;  // MoE blocks (router_w null in dense blocks, whose fc_w ... are null in MoE blocks)
  int layer;         // global block index
};
template <typename T>
struct ModelParams {
  T* wte = nullptr;  // (Vl,C)
  T* wpe = nullptr;  // (T,C) learned positions only
  std::vector<BlockParams<T>> blocks;  // in the order of part.layers()
  T* lnf_w = nullptr;
  T* lnf_b = nullptr;
  T* head = nullptr;  // (Vl,C) the LM head: wte (tied) or lm_head
};

// Pointers to every tensor of `plan`'s table in an arena of element type T (float or bf16).
template <typename T>
ModelParams<T> views(const RankPlan& plan, T* base);

}  // namespace dtrain
