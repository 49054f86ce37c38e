// The KvDecoder of a model (model/kv_decoder.hpp) over its compute weights, for storage type T: what
// GptModelImpl<T>::make_decoder calls. Null where the cache does not apply (not the whole model on one
// rank, or mixture-of-experts blocks).
#pragma once
#include <memory>

#include "kernels/kernels.hpp"
#include "model/kv_decoder.hpp"
#include "model/param_views.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/device.hpp"

namespace dtrain {

template <typename T>
std::unique_ptr<KvDecoder> make_kv_decoder(const RankPlan& plan, const ModelParams<T>& params, const kernels::KernelTable<T>& k,
                                           Device& device, int batch);

}  // namespace dtrain
