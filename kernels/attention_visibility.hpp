// Which keys a query row of attention sees, one value per row: its first visible key,
//   first = max(its document's start, position - window + 1),
// and it sees the keys at positions first..position (causal). Documents packed in a sample
// (data.reset_attention_mask) give the start of each row's document; a sliding window (model.window_size
// = W: the row and the W - 1 positions before it) gives the second term. Every attention kernel of
// kernel_api.inc takes a KeyVisibility and asks it for each row's first key; the fused kernels skip the
// key tiles wholly before a query tile's first row's first key (it grows along the rows), so keys
// outside a row's document or window cost nothing. Ring attention and the key/value cache pass the
// same value on.
#pragma once
#include "kernels/host_device.hpp"

namespace dtrain::kernels {

struct KeyVisibility {
  const int* doc_start = nullptr;  // per query row (the sample's (T) rows, or a block's (Tq)): its document's start; null: one document
  int window = 0;                  // keys a row sees at most, itself included; 0: no window

  // The first key position that row r (an index into doc_start) at sample position `pos` sees.
  DTRAIN_HOST_DEVICE int first_key(long r, int pos) const {
    const int doc = doc_start ? doc_start[r] : 0;
    const int win = window > 0 ? pos - window + 1 : 0;
    return doc > win ? doc : win;
  }
  // The same for the rows from row r on (doc_start advanced by r).
  DTRAIN_HOST_DEVICE KeyVisibility from_row(long r) const { return {doc_start ? doc_start + r : nullptr, window}; }
  // Whether anything but causality limits a row's keys.
  DTRAIN_HOST_DEVICE bool limits() const { return doc_start != nullptr || window > 0; }
};

struct KeyRange {
  int first, last;  // keys [first, last) of the block; empty when first >= last
};

// The keys of a block of Tk keys at positions k_pos, k_pos + 1, ... that the query at position qp
// (first visible key position `first`) sees: [max(0, first - k_pos), min(Tk, qp - k_pos + 1)), clamped
// to [0, Tk] and never reversed.
DTRAIN_HOST_DEVICE inline KeyRange block_visible_keys(int qp, int first, int k_pos, int Tk) {
  const int last = qp - k_pos + 1 < Tk ? qp - k_pos + 1 : Tk;
  const int from = first - k_pos < 0 ? 0 : first - k_pos;
  const int lo = from < Tk ? from : Tk;
  return {lo, last > lo ? last : lo};
}

// Whether the query at position qp (first visible key position `first`) sees the key at position kp.
DTRAIN_HOST_DEVICE inline bool sees_key(int qp, int first, int kp) { return kp <= qp && kp >= first; }

}  // namespace dtrain::kernels
