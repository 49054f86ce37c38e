// KvCache<T>: the keys and values of a batch of sequences for every layer, kept on the model's device
// (layer, sequence, position, [k | v] of the key/value heads), and the attention of a decode pass's
// rows against them. A decode pass (GptModelImpl::decode) runs new rows of several sequences through
// the blocks as one sample of n rows; `pieces` says which rows belong to which sequence. At each block,
// attend() appends the pieces' keys and values to the layer's cache and attends every new row causally
// to its sequence's cached keys; end_pass() then moves each sequence's length past its new rows.
// With a sliding window of W keys in every block a sequence keeps 3W - 2 slots (or its capacity, if
// fewer), not one per position (a block without the window, model.window_attn_skip_freq, needs them all): a pass adds at most W rows of a sequence (max_piece), and when they would not fit, the last
// W - 1 keys (all a new row can see) move to the front and the slots' first position (base) moves on. The
// move never overlaps itself (the kept keys start at least W - 1 slots in), so it is one copy.
#pragma once
#include <algorithm>
#include <vector>

#include "kernels/kernels.hpp"
#include "plan/activation_layout.hpp"
#include "runtime/arena.hpp"
#include "runtime/device.hpp"

namespace dtrain {

// Rows [row, row + n) of a decode pass are the next n tokens of sequence `seq`.
struct KvPiece {
  int seq;
  long row;
  int n;
};

template <typename T>
class KvCache {
 public:
  // d: the model's activation dims (whole model on one rank); windows: each block's sliding window (0:
  // none); rows: the most rows of a pass.
  KvCache(const ActivationDims& d, const std::vector<int>& windows, int batch, int capacity, long rows, Device& device);

  // The pieces of the next pass (each within capacity, sequences in any order, each at most once).
  void begin_pass(std::vector<KvPiece> pieces);
  // atty (n,C) <- attention of the pass's query rows of qkv (n,QKV) (after RoPE) over their sequences'
  // cached keys and their own, whose keys and values layer `layer`'s cache takes first; lse (NH,n) per
  // piece, scratch: kernels::attention_scratch_floats(1, capacity, NH) floats.
  void attend(const kernels::KernelTable<T>& k, T* atty, float* lse, float* scratch, const T* qkv, int layer);
  void end_pass();

  const std::vector<KvPiece>& pieces() const { return pieces_; }
  int length(int seq) const { return lengths_.at(static_cast<std::size_t>(seq)); }
  void clear(int seq) { lengths_.at(static_cast<std::size_t>(seq)) = 0, bases_.at(static_cast<std::size_t>(seq)) = 0; }
  int batch() const { return static_cast<int>(lengths_.size()); }
  int capacity() const { return capacity_; }
  // The most rows of one sequence a pass may add.
  int max_piece() const { return ring_window_ > 0 ? std::min(ring_window_, capacity_) : capacity_; }

 private:
  int kv_width() const { return 2 * d_.NKVl * d_.HD(); }
  ActivationDims d_;
  int capacity_;
  std::vector<int> windows_;  // per block
  int ring_window_;           // the window every block has (0: some block has none): the slots keep 3W - 2
  int slots_;
  std::vector<int> lengths_;
  std::vector<int> bases_;       // each sequence's position of its first slot
  std::vector<KvPiece> pieces_;
  std::vector<int> moves_;       // per piece of the pass: the slots its keys move back by before it (0: none)
  Arena cache_;  // (layers, batch, slots, kv_width)
  Arena acc_;    // (rows, Cl) fp32: the attention output before rounding
};

}  // namespace dtrain
