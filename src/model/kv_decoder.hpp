// KvDecoder: generation with a key/value cache. For each of a batch of sequences the keys and values
// of every layer are kept on the model's device (model/kv_cache.hpp), so a new token costs one token's
// forward pass: its row through the training forward's own block routine (GptModelImpl::decode; fp8
// linear layers and MoE blocks included), its attention one query row against the cached keys, and the
// LM head of each sequence's last row only. The prompt goes through the same path as one extend of
// several rows. Whole model on one rank; MoE blocks dropless (GptModel::make_decoder gives null
// otherwise, and generation runs the full context).
#pragma once
#include <memory>
#include <vector>

namespace dtrain {

class KvDecoder {
 public:
  virtual ~KvDecoder() = default;
  // Appends new_tokens[b] (maybe none) to sequence b at its next positions, computing their keys and
  // values into the cache, and writes the logits of each extended sequence's last token to row b of
  // logits ((batch, vocab rows of the model), fp32 on the host; other rows untouched). A sequence may not
  // pass capacity() tokens.
  virtual void extend(const std::vector<std::vector<int>>& new_tokens, float* logits) = 0;
  virtual int length(int b) const = 0;
  virtual void clear(int b) = 0;  // forget sequence b (to restart it from a shorter context)
  virtual int batch() const = 0;
  virtual int capacity() const = 0;  // tokens a sequence may hold: model.seq_length
};

}  // namespace dtrain
