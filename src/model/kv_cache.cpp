// KvCache<T> (model/kv_cache.hpp): the cache's memory and the attention of a decode pass against it.
#include "model/kv_cache.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"
#include "kernels/attention_scratch.hpp"

namespace dtrain {

template <typename T>
KvCache<T>::KvCache(const ActivationDims& d, int layers, int batch, int capacity, int window, long rows, Device& device)
    : d_(d),
      capacity_(capacity),
      window_(window),
      lengths_(static_cast<std::size_t>(batch), 0),
      cache_(device, sizeof(T) * static_cast<std::size_t>(layers) * static_cast<std::size_t>(batch) *
                         static_cast<std::size_t>(capacity) * static_cast<std::size_t>(kv_width())),
      acc_(device, sizeof(float) * static_cast<std::size_t>(rows) * static_cast<std::size_t>(d.Cl)) {}

template <typename T>
void KvCache<T>::begin_pass(std::vector<KvPiece> pieces) {
  for (const KvPiece& p : pieces)
    if (p.seq < 0 || p.seq >= batch() || p.n < 1 || length(p.seq) + p.n > capacity_) fatal("KvCache: a piece outside the cache");
  pieces_ = std::move(pieces);
}

template <typename T>
void KvCache<T>::attend(const kernels::KernelTable<T>& k, T* atty, float* lse, float* scratch, const T* qkv, int layer) {
  const int W = d_.QKVl(), KW = kv_width(), C = d_.Cl, NH = d_.NHl;  // C: the attention's width
  // Query rows per attention call: the scratch holds (NH, rows, capacity) floats for this many.
  const int tile = std::min(capacity_, kernels::kAttentionRows);
  const long n = pieces_.empty() ? 0 : pieces_.back().row + pieces_.back().n;
  float* acc = acc_.as<float>();
  k.fill(acc, 0.0f, n * C);
  k.fill(lse, -std::numeric_limits<float>::infinity(), n * NH);
  T* layer_cache = cache_.as<T>() + static_cast<long>(layer) * batch() * capacity_ * KW;
  for (const KvPiece& p : pieces_) {
    const int at = length(p.seq);
    T* seq = layer_cache + static_cast<long>(p.seq) * capacity_ * KW;
    k.copy_columns(seq + static_cast<long>(at) * KW, qkv + p.row * W, p.n, W, C, KW);
    // The new rows (positions at..at+n-1) against every cached key of the sequence, causally.
    for (int q = 0; q < p.n; q += tile) {
      const int rows = std::min(tile, p.n - q);
      const long r = p.row + q;
      k.attention_block_forward(acc + r * C, lse + r * NH, scratch, qkv + r * W, W, seq, KW, rows, at + q + rows, NH, d_.NKVl, d_.HD(),
                                at + q, 0, kernels::KeyVisibility{nullptr, window_});
    }
  }
  k.narrow(atty, acc, n * C);
}

template <typename T>
void KvCache<T>::end_pass() {
  for (const KvPiece& p : pieces_) lengths_[static_cast<std::size_t>(p.seq)] += p.n;
  pieces_.clear();
}

template class KvCache<float>;
template class KvCache<bf16>;
template class KvCache<fp16>;

}  // namespace dtrain
