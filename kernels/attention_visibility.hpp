// Which keys a query row of attention sees, for both backends' block kernels (attention_block_forward,
// attention_block_backward: ring attention, generation with a key/value cache): a query at sample
// position qp sees the keys at positions kp <= qp (causal) that are not before its document's start
// ds (documents packed in a sample; ds = kNoDocuments when the sample is one document).
#pragma once
#include <climits>

#include "kernels/host_device.hpp"

namespace dtrain::kernels {

constexpr int kNoDocuments = INT_MIN;

struct KeyRange {
  int first, last;  // keys [first, last) of the block; empty when first >= last
};

// The keys of a block of Tk keys at positions k_pos, k_pos + 1, ... that the query at position qp
// (document start ds) sees: [max(0, ds - k_pos), min(Tk, qp - k_pos + 1)), clamped to [0, Tk] and never
// reversed.
DTRAIN_HOST_DEVICE inline KeyRange block_visible_keys(int qp, int ds, int k_pos, int Tk) {
  const int last = qp - k_pos + 1 < Tk ? qp - k_pos + 1 : Tk;
  const int from = ds == kNoDocuments || ds - k_pos < 0 ? 0 : ds - k_pos;
  const int first = from < Tk ? from : Tk;
  return {first, last > first ? last : first};
}

// Whether the query at position qp (document start ds) sees the key at position kp.
DTRAIN_HOST_DEVICE inline bool sees_key(int qp, int ds, int kp) { return kp <= qp && (ds == kNoDocuments || kp >= ds); }

}  // namespace dtrain::kernels
