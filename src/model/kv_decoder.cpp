// KvDecoderImpl<T>: generation with a key/value cache over a GptModelImpl<T>. An extend's new rows go
// through the model's own forward pass (GptModelImpl::decode: the training blocks, their attention
// reading the cache) in passes of at most the micro-batch's rows, a sequence's rows in order; then the
// LM head of each extended sequence's last row.
#include "model/kv_decoder.hpp"

#include "common/error.hpp"
#include "model/gpt_model_impl.hpp"
#include "model/kv_cache.hpp"
#include "model/kv_decoder_factory.hpp"
#include "runtime/arena.hpp"

namespace dtrain {
namespace {

std::vector<int> block_windows(const ModelShape& shape) {
  std::vector<int> windows;
  for (int l = 0; l < shape.num_layers; ++l) windows.push_back(shape.window_at(l));
  return windows;
}

template <typename T>
class KvDecoderImpl final : public KvDecoder {
 public:
  KvDecoderImpl(GptModelImpl<T>& model, int batch)
      : model_(model),
        rows_(model.dims().N()),
        cache_(model.dims(), block_windows(model.plan().shape), batch, model.plan().shape.seq_length, rows_,
               model.device()),
        ids_(model.device(), 2 * static_cast<std::size_t>(rows_) * sizeof(int)) {}

  void extend(const std::vector<std::vector<int>>& new_tokens, float* logits) override {
    if (static_cast<int>(new_tokens.size()) != batch()) fatal("KvDecoder::extend: one list of tokens per sequence");
    for (int b = 0; b < batch(); ++b)
      if (length(b) + static_cast<long>(new_tokens[static_cast<std::size_t>(b)].size()) > capacity())
        fatal("KvDecoder::extend: a sequence beyond model.seq_length");
    const int Vl = model_.dims().Vl;
    std::vector<std::size_t> done(new_tokens.size(), 0);  // each sequence's tokens already run
    std::vector<int> host(2 * static_cast<std::size_t>(rows_));
    for (int b = 0; b < batch();) {
      // One pass: the next sequences' remaining tokens, as many rows as fit.
      std::vector<KvPiece> pieces;
      std::vector<int> ends;  // the sequences whose last new row is in this pass
      long n = 0;
      for (; b < batch() && n < rows_; ++b) {
        const auto& t = new_tokens[static_cast<std::size_t>(b)];
        std::size_t& at = done[static_cast<std::size_t>(b)];
        const int take = static_cast<int>(std::min<long>({static_cast<long>(t.size() - at), rows_ - n, cache_.max_piece()}));
        if (take == 0) continue;
        for (int i = 0; i < take; ++i) {
          host[static_cast<std::size_t>(n + i)] = t[at + static_cast<std::size_t>(i)];
          host[static_cast<std::size_t>(rows_ + n + i)] = length(b) + i;
        }
        pieces.push_back({b, n, take});
        n += take, at += static_cast<std::size_t>(take);
        if (at < t.size()) break;  // the pass is full, or the piece as long as the cache takes: on in the next
        ends.push_back(b);
      }
      if (n == 0) break;
      int* ids = ids_.as<int>();
      model_.device().copy(ids, host.data(), host.size() * sizeof(int));
      MicroBatch rows{ids, nullptr};
      rows.positions = ids + rows_;
      cache_.begin_pass(pieces);
      model_.decode(rows, n, cache_);
      cache_.end_pass();
      for (const KvPiece& p : pieces)
        for (const int e : ends)
          if (p.seq == e) model_.decode_logits(p.row + p.n - 1, logits + static_cast<long>(e) * Vl);
    }
  }

  int length(int b) const override { return cache_.length(b); }
  void clear(int b) override { cache_.clear(b); }
  int batch() const override { return cache_.batch(); }
  int capacity() const override { return cache_.capacity(); }

 private:
  GptModelImpl<T>& model_;
  long rows_;  // the most rows of a pass: the micro-batch's
  KvCache<T> cache_;
  Arena ids_;  // (2, rows_): token ids and positions of a pass
};

}  // namespace

template <typename T>
std::unique_ptr<KvDecoder> make_kv_decoder(GptModelImpl<T>& model, int batch) {
  const RankPlan& plan = model.plan();
  if (!plan.part.embedding || !plan.part.head || model.num_chunks() != 1 || plan.sizes.tp != 1 || plan.activations.dims.cp != 1 ||
      plan.activations.dims.ep != 1 || (plan.shape.experts > 0 && plan.shape.capacity_factor > 0))
    return nullptr;
  return std::make_unique<KvDecoderImpl<T>>(model, batch);
}

template std::unique_ptr<KvDecoder> make_kv_decoder<float>(GptModelImpl<float>&, int);
template std::unique_ptr<KvDecoder> make_kv_decoder<bf16>(GptModelImpl<bf16>&, int);
template std::unique_ptr<KvDecoder> make_kv_decoder<fp16>(GptModelImpl<fp16>&, int);

}  // namespace dtrain
