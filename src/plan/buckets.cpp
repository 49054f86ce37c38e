// Gradient buckets, data-parallel slices and the counting rule.
#include "plan/buckets.hpp"

#include <algorithm>

namespace dtrain {

namespace {

std::size_t padded(std::size_t n, int multiple) {
  const std::size_t unit = 16 * static_cast<std::size_t>(std::max(1, multiple));
  return (n + unit - 1) / unit * unit;
}

}  // namespace

std::size_t padded_arena_size(const TensorTable& table, int multiple) { return padded(table.total(), multiple); }

std::size_t padded_gradient_size(const TensorTable& table, int multiple) { return padded(table.trainable_total(), multiple); }

int bucket_layer(const TensorSpec& t) {
  if (t.layer >= 0) return t.layer;
  return t.name == "wte" || t.name == "wpe" ? kEmbeddingLayer : kHeadLayer;
}

std::vector<BucketSpan> gradient_buckets(const TensorTable& table, std::size_t size) {
  std::vector<BucketSpan> buckets;
  for (const auto& t : table.tensors())
    if (t.trainable && (buckets.empty() || buckets.back().layer != bucket_layer(t) || buckets.back().expert != t.expert))
      buckets.push_back({{t.offset, size}, bucket_layer(t), t.expert});
  for (std::size_t i = 0; i + 1 < buckets.size(); ++i) buckets[i].range.end = buckets[i + 1].range.begin;
  return buckets;
}

ArenaRange owned_slice(const BucketSpan& b, const SliceGroup& g) {
  const std::size_t slice = (b.range.end - b.range.begin) / static_cast<std::size_t>(g.size);
  const std::size_t lo = b.range.begin + slice * static_cast<std::size_t>(g.rank);
  return {lo, lo + slice};
}

std::vector<ArenaRange> optimizer_ranges(const std::vector<BucketSpan>& buckets, std::size_t size, const GradientGroups& groups,
                                         bool distributed) {
  if (!distributed) return {{0, size}};
  std::vector<ArenaRange> owned;
  for (const auto& b : buckets) {
    const ArenaRange slice = owned_slice(b, groups.of(b));
    if (slice.end > slice.begin) owned.push_back(slice);
  }
  return owned;
}

std::vector<int> buckets_of_layer(const std::vector<BucketSpan>& buckets, int layer, bool tied) {
  std::vector<int> found;
  const auto add = [&](int group) {
    for (int i = 0; i < static_cast<int>(buckets.size()); ++i)
      if (buckets[static_cast<std::size_t>(i)].layer == group) found.push_back(i);
  };
  add(layer);
  if (layer == kHeadLayer && tied) add(kEmbeddingLayer);  // the tied head reads wte
  return found;
}

bool counts_tensor(const TensorSpec& t, int tp_rank, bool last_stage_with_tied_copy) {
  if (t.split_dim < 0 && tp_rank != 0) return false;                // replicated over TP
  if (t.name == "wte" && last_stage_with_tied_copy) return false;  // the first stage counts it
  return true;
}

}  // namespace dtrain
