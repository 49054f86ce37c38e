// KvCache<T> (model/kv_cache.hpp): the cache's memory and the attention of a decode pass against it.
#include "model/kv_cache.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"
#include "kernels/attention_scratch.hpp"

namespace dtrain {

namespace {

// The window every block has, or 0 when some block has none (or they differ).
int common_window(const std::vector<int>& windows) {
  for (int w : windows)
    if (w != windows.front()) return 0;
  return windows.empty() ? 0 : windows.front();
}

}  // namespace

template <typename T>
KvCache<T>::KvCache(const ActivationDims& d, const std::vector<int>& windows, int batch, int capacity, long rows, Device& device)
    : d_(d),
      capacity_(capacity),
      windows_(windows),
      ring_window_(common_window(windows)),
      slots_(ring_window_ > 0 ? std::min(capacity, 3 * ring_window_ - 2) : capacity),
      lengths_(static_cast<std::size_t>(batch), 0),
      bases_(static_cast<std::size_t>(batch), 0),
      cache_(device, sizeof(T) * windows.size() * static_cast<std::size_t>(batch) * static_cast<std::size_t>(slots_) *
                         static_cast<std::size_t>(kv_width())),
      acc_(device, sizeof(float) * static_cast<std::size_t>(rows) * static_cast<std::size_t>(d.Cl)) {}

template <typename T>
void KvCache<T>::begin_pass(std::vector<KvPiece> pieces) {
  moves_.clear();
  for (const KvPiece& p : pieces) {
    if (p.seq < 0 || p.seq >= batch() || p.n < 1 || p.n > max_piece() || length(p.seq) + p.n > capacity_)
      fatal("KvCache: a piece outside the cache");
    // Keys beyond the slots: keep the last W - 1, all the new rows can see.
    const int used = length(p.seq) - bases_[static_cast<std::size_t>(p.seq)];
    moves_.push_back(used + p.n > slots_ ? used - (ring_window_ - 1) : 0);
  }
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
  T* layer_cache = cache_.as<T>() + static_cast<long>(layer) * batch() * slots_ * KW;
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    const KvPiece& p = pieces_[i];
    T* seq = layer_cache + static_cast<long>(p.seq) * slots_ * KW;
    const int move = moves_[i];
    if (move > 0) k.copy_columns(seq, seq + static_cast<long>(move) * KW, ring_window_ - 1, KW, 0, KW);
    const int at = length(p.seq) - bases_[static_cast<std::size_t>(p.seq)] - move;  // the new rows' first slot
    k.copy_columns(seq + static_cast<long>(at) * KW, qkv + p.row * W, p.n, W, C, KW);
    // The new rows (positions at..at+n-1) against every cached key of the sequence, causally.
    for (int q = 0; q < p.n; q += tile) {
      const int rows = std::min(tile, p.n - q);
      const long r = p.row + q;
      k.attention_block_forward(acc + r * C, lse + r * NH, scratch, qkv + r * W, W, seq, KW, rows, at + q + rows, NH, d_.NKVl, d_.HD(),
                                at + q, 0, kernels::KeyVisibility{nullptr, windows_[static_cast<std::size_t>(layer)]});
    }
  }
  k.narrow(atty, acc, n * C);
}

template <typename T>
void KvCache<T>::end_pass() {
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    const auto seq = static_cast<std::size_t>(pieces_[i].seq);
    lengths_[seq] += pieces_[i].n;
    bases_[seq] += moves_[i];
  }
  pieces_.clear();
}

template class KvCache<float>;
template class KvCache<bf16>;
template class KvCache<fp16>;

}  // namespace dtrain
