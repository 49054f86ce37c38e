// StateSnapshot: a host copy of exactly the pieces a rank writes to a checkpoint (what for_each_piece
// visits in its state), taken at a step boundary so that the shard can be written while training
// goes on changing the state. One buffer, kept and reused by every later snapshot (it only grows).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ckpt/checkpoint.hpp"

namespace dtrain {

class StateSnapshot {
 public:
  // Makes the buffer large enough for the pieces of `state` (only their sizes are read) and touches
  // every page, so that memory is committed now; returns the buffer's bytes. UserError when it cannot
  // be allocated.
  std::size_t reserve(const RankState& state);
  // Copies every piece of `state` into the buffer (reserve first); returns the bytes copied. The plan `state` points
  // to must outlive the snapshot (the pieces refer to its tensors). UserError when the buffer cannot
  // be allocated.
  std::size_t take(const RankState& state);
  // Visits the copied pieces in for_each_piece's order (a PieceSource for write_shard).
  void for_each(const PieceVisitor& visit) const;
  void release();  // frees the buffer (the pieces are gone)

 private:
  struct Piece {
    int kind;
    const TensorSpec* tensor;
    int index;
    std::size_t at;  // where its values start in the buffer
    std::int64_t flat_begin, count;
  };
  std::vector<Piece> pieces_;
  std::unique_ptr<float[]> buffer_;
  std::size_t capacity_ = 0;  // floats
};

}  // namespace dtrain
