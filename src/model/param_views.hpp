// Typed pointers to every parameter tensor of a rank's arena (ModelParams, one BlockParams per block
// it holds), for the compute weights (T) or the fp32 gradients: the model's view of the tensor table.
#pragma once
#include <string>
#include <vector>

#include "common/error.hpp"
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
  T *qnorm_w = nullptr, *knorm_w = nullptr;  // (HD) each, model.qk_layernorm
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

// Pointers to every tensor of `plan`'s table in an arena of element type T (null for tensors the
// model does not have): the parameter arena, or with trainable_only the gradient arena (null for
// frozen tensors, which have no gradient).
template <typename T>
ModelParams<T> views(const RankPlan& plan, T* base, bool trainable_only = false) {
  ModelParams<T> v;
  const TensorTable& table = plan.table;
  auto at = [&](const std::string& name) -> T* {
    const TensorSpec* t = table.find(name);
    return t && (t->trainable || !trainable_only) ? base + t->offset : nullptr;
  };
  // The packed [q | k | v] weight: one tensor, or kv right after q in the arena.
  auto packed_qkv = [&](const std::string& h, const char* q, const char* kv, const char* qkv) -> T* {
    if (!plan.shape.grouped()) return at(h + qkv);
    const TensorSpec* tq = table.find(h + q);
    const TensorSpec* tkv = table.find(h + kv);
    if (!tq || !tkv || (trainable_only && !tq->trainable)) return nullptr;
    if (tkv->offset != tq->offset + tq->numel) fatal("internal error: " + h + kv + " is not packed after " + h + q);
    return base + tq->offset;
  };
  v.wte = at("wte");
  v.wpe = at("wpe");
  for (int l : plan.part.layers()) {
    const std::string h = "h" + std::to_string(l) + ".";
    v.blocks.push_back({at(h + "ln1_w"), at(h + "ln1_b"), packed_qkv(h, "q_w", "kv_w", "qkv_w"), packed_qkv(h, "q_b", "kv_b", "qkv_b"),
                        at(h + "proj_w"), at(h + "proj_b"), at(h + "ln2_w"), at(h + "ln2_b"), at(h + "fc_w"), at(h + "fc_b"),
                        at(h + "fcproj_w"), at(h + "fcproj_b"),
                        {at(h + "router_w"), at(h + "expert_fc_w"), at(h + "expert_fc_b"), at(h + "expert_fcproj_w"),
                         at(h + "expert_fcproj_b")},
                        l, at(h + "qnorm_w"), at(h + "knorm_w")});
  }
  if (plan.part.head) {
    v.lnf_w = at("lnf_w");
    v.lnf_b = at("lnf_b");
    v.head = plan.shape.tied ? v.wte : at("lm_head");
  }
  return v;
}

}  // namespace dtrain
