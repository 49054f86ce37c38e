// The bookkeeping of on-demand memory (Device::reserve): an address range cut into units (host pages,
// GPU allocation chunks) that have memory behind them or not. commit() names the runs of units to back
// (every unit overlapping the range that has none); discard() names the runs to unback (units wholly
// inside the range that are backed) and the byte spans to zero (the range's parts in backed units at
// its edges). The devices do the mapping; this class only decides, so it is tested on the host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

class OnDemandRegion {
 public:
  struct Run {  // units [first, first + count)
    std::size_t first, count;
  };
  struct Span {  // bytes [offset, offset + bytes) of the region
    std::size_t offset, bytes;
  };
  struct Discard {
    std::vector<Run> unback;
    std::vector<Span> zero;
  };

  // bytes of address space in units of `unit` bytes (the last unit may reach past bytes); nothing backed.
  OnDemandRegion(std::size_t bytes, std::size_t unit);
  // Marks the units overlapping bytes [offset, offset + bytes) backed; returns those that were not.
  std::vector<Run> commit(std::size_t offset, std::size_t bytes);
  // Marks the backed units wholly inside [offset, offset + bytes) unbacked and returns them, with the
  // parts of the range in backed units at its edges (to be zeroed: they keep their memory).
  Discard discard(std::size_t offset, std::size_t bytes);
  std::size_t unit() const { return unit_; }
  std::size_t units() const { return backed_.size(); }
  std::size_t bytes() const { return bytes_; }
  std::size_t backed_bytes() const { return backed_units_ * unit_; }
  bool backed(std::size_t unit) const { return backed_[unit]; }

 private:
  std::size_t bytes_, unit_, backed_units_ = 0;
  std::vector<bool> backed_;
};

}  // namespace dtrain
