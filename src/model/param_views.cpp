// views(): the tensor table's offsets as typed pointers.
#include "model/param_views.hpp"

#include "common/bf16.hpp"
#include "common/error.hpp"

namespace dtrain {

template <typename T>
ModelParams<T> views(const RankPlan& plan, T* base) {
  ModelParams<T> v;
  const TensorTable& table = plan.table;
  auto at = [&](const std::string& name) -> T* {
    const TensorSpec* t = table.find(name);
    return t ? base + t->offset : nullptr;
  };
  // The packed [q | k | v] weight: one tensor, or kv right after q in the arena.
  auto packed_qkv = [&](const std::string& h, const char* q, const char* kv, const char* qkv) -> T* {
    if (!plan.shape.grouped()) return at(h + qkv);
    const TensorSpec* tq = table.find(h + q);
    const TensorSpec* tkv = table.find(h + kv);
    if (!tq || !tkv) return nullptr;
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
                        l});
  }
  if (plan.part.head) {
    v.lnf_w = at("lnf_w");
    v.lnf_b = at("lnf_b");
    v.head = plan.shape.tied ? v.wte : at("lm_head");
  }
  return v;
}


template ModelParams<float> views(const RankPlan&, float*);
template ModelParams<bf16> views(const RankPlan&, bf16*);

}  // namespace dtrain
