// A range of elements of one of a rank's arenas (parameters, gradients): the unit of gradient buckets,
// of the optimizer's ownership and of checkpoint pieces.
#pragma once
#include <cstddef>
#include <vector>

namespace dtrain {

// Elements [begin, end) of an arena.
struct ArenaRange {
  std::size_t begin, end;
};

inline std::size_t total_elements(const std::vector<ArenaRange>& ranges) {
  std::size_t n = 0;
  for (const auto& r : ranges) n += r.end - r.begin;
  return n;
}

}  // namespace dtrain
