// Gradient buckets, data-parallel slices and the counting rule.
#include "plan/buckets.hpp"

#include <algorithm>

namespace dtrain {

std::size_t padded_arena_size(const TensorTable& table, int multiple) {
  const std::size_t unit = 16 * static_cast<std::size_t>(std::max(1, multiple));
  return (table.total() + unit - 1) / unit * unit;
}

std::vector<BucketSpan> gradient_buckets(const TensorTable& table, std::size_t size) {
  std::vector<BucketSpan> spans;
  for (const auto& t : table.tensors()) {
    if (t.layer < 0) continue;
    if (spans.empty() || spans.back().layer != t.layer) spans.push_back({{t.offset, t.offset}, t.layer});
    spans.back().range.end = t.offset + t.numel;
  }
  const std::size_t first = spans.empty() ? size : spans.front().range.begin;
  const std::size_t last = spans.empty() ? size : spans.back().range.end;
  std::vector<BucketSpan> buckets{{{0, first}, -1}};
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const std::size_t end = i + 1 < spans.size() ? spans[i + 1].range.begin : last;  // alignment gaps go with the block
    buckets.push_back({{spans[i].range.begin, end}, spans[i].layer});
  }
  buckets.push_back({{last, size}, -1});
  return buckets;
}

std::vector<int> slice_counts(std::size_t n, int dp) {
  std::vector<int> counts;
  for (int i = 0; i < dp; ++i) counts.push_back(static_cast<int>(n / dp + (static_cast<std::size_t>(i) < n % dp ? 1 : 0)));
  return counts;
}

std::vector<ArenaRange> optimizer_ranges(const std::vector<BucketSpan>& buckets, std::size_t size, int dp, int r,
                                         bool distributed) {
  if (!distributed) return {{0, size}};
  std::vector<ArenaRange> owned;
  for (const auto& b : buckets) {
    const auto counts = slice_counts(b.range.end - b.range.begin, dp);
    std::size_t lo = b.range.begin;
    for (int i = 0; i < r; ++i) lo += static_cast<std::size_t>(counts[i]);
    if (counts[r] > 0) owned.push_back({lo, lo + static_cast<std::size_t>(counts[r])});
  }
  return owned;
}

bool counts_tensor(const TensorSpec& t, int tp_rank, bool last_stage_with_tied_copy) {
  if (t.split_dim < 0 && tp_rank != 0) return false;                // replicated over TP
  if (t.name == "wte" && last_stage_with_tied_copy) return false;  // the first stage counts it
  return true;
}

}  // namespace dtrain
