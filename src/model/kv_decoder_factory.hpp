// The KvDecoder of a model (model/kv_decoder.hpp): what GptModelImpl<T>::make_decoder calls. Null
// where the cache does not apply: not the whole model on one rank, or MoE blocks that drop tokens over
// capacity (their choices depend on the whole micro-batch) or place experts on other ranks.
#pragma once
#include <memory>

#include "model/kv_decoder.hpp"

namespace dtrain {

template <typename T>
class GptModelImpl;

template <typename T>
std::unique_ptr<KvDecoder> make_kv_decoder(GptModelImpl<T>& model, int batch);

}  // namespace dtrain
