// OnDemandRegion: unit arithmetic of commit and discard.
#include "runtime/on_demand_region.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace dtrain {

OnDemandRegion::OnDemandRegion(std::size_t bytes, std::size_t unit) : bytes_(bytes), unit_(unit), backed_((bytes + unit - 1) / unit, false) {
  if (unit == 0) fatal("internal error: on-demand memory with a unit of 0 bytes");
}

std::vector<OnDemandRegion::Run> OnDemandRegion::commit(std::size_t offset, std::size_t bytes) {
  std::vector<Run> runs;
  if (bytes == 0) return runs;
  if (offset + bytes > bytes_) fatal("internal error: committing past the end of on-demand memory");
  const std::size_t first = offset / unit_, last = (offset + bytes - 1) / unit_;  // overlapping units
  for (std::size_t u = first; u <= last; ++u) {
    if (backed_[u]) continue;
    backed_[u] = true;
    ++backed_units_;
    if (!runs.empty() && runs.back().first + runs.back().count == u)
      ++runs.back().count;
    else
      runs.push_back({u, 1});
  }
  return runs;
}

OnDemandRegion::Discard OnDemandRegion::discard(std::size_t offset, std::size_t bytes) {
  Discard d;
  if (bytes == 0) return d;
  if (offset + bytes > bytes_) fatal("internal error: discarding past the end of on-demand memory");
  const std::size_t end = offset + bytes;
  const std::size_t inner_first = (offset + unit_ - 1) / unit_, inner_end = end / unit_;  // units wholly inside
  // The edges: the range's bytes in a unit it only partly covers, zeroed where that unit is backed.
  auto edge = [&](std::size_t from, std::size_t to) {
    if (from < to && backed_[from / unit_]) d.zero.push_back({from, to - from});
  };
  if (inner_first >= inner_end) {  // no unit wholly inside: one or two partial units
    const std::size_t split = std::min(end, (offset / unit_ + 1) * unit_);
    edge(offset, split);
    edge(split, end);
    return d;
  }
  edge(offset, inner_first * unit_);
  for (std::size_t u = inner_first; u < inner_end; ++u) {
    if (!backed_[u]) continue;
    backed_[u] = false;
    --backed_units_;
    if (!d.unback.empty() && d.unback.back().first + d.unback.back().count == u)
      ++d.unback.back().count;
    else
      d.unback.push_back({u, 1});
  }
  edge(inner_end * unit_, end);
  return d;
}

}  // namespace dtrain
