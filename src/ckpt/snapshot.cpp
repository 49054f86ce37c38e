// StateSnapshot: the pieces of a rank's state copied into one reused host buffer.
#include "ckpt/snapshot.hpp"

#include <algorithm>
#include <new>
#include <string>

#include "common/error.hpp"

namespace dtrain {

namespace {

std::size_t piece_elements(const RankState& state) {
  std::size_t total = 0;
  for_each_piece(state, [&](int, const TensorSpec&, int, const float*, std::int64_t, std::int64_t count) {
    total += static_cast<std::size_t>(count);
  });
  return total;
}

}  // namespace

std::size_t StateSnapshot::reserve(const RankState& state) {
  const std::size_t total = piece_elements(state);
  if (total <= capacity_) return capacity_ * sizeof(float);
  buffer_.reset();  // the old buffer goes first: never both at once
  try {
    buffer_.reset(new float[total]);
  } catch (const std::bad_alloc&) {
    capacity_ = 0;
    throw UserError("cannot allocate " + std::to_string(total * sizeof(float) / 1000000) +
                    " MB of host memory for the checkpoint snapshot of checkpoint.async_save=true; give the ranks more "
                    "memory or save synchronously (checkpoint.async_save=false)");
  }
  std::fill_n(buffer_.get(), total, 0.0f);  // every page touched now, not in the first save's stall
  capacity_ = total;
  return capacity_ * sizeof(float);
}

std::size_t StateSnapshot::take(const RankState& state) {
  reserve(state);
  pieces_.clear();
  std::size_t at = 0;
  for_each_piece(state, [&](int kind, const TensorSpec& t, int index, const float* data, std::int64_t flat, std::int64_t count) {
    std::copy_n(data, count, buffer_.get() + at);
    pieces_.push_back({kind, &t, index, at, flat, count});
    at += static_cast<std::size_t>(count);
  });
  return at * sizeof(float);
}

void StateSnapshot::release() {
  pieces_.clear();
  buffer_.reset();
  capacity_ = 0;
}

void StateSnapshot::for_each(const PieceVisitor& visit) const {
  for (const Piece& p : pieces_) visit(p.kind, *p.tensor, p.index, buffer_.get() + p.at, p.flat_begin, p.count);
}

}  // namespace dtrain
