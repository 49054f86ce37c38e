// How a rank's gradient arena is cut for data parallelism, as pure functions of its tensor table:
// the buckets reduced together, the slices the distributed optimizer gives each data-parallel rank,
// and which rank counts (and writes to checkpoints) a tensor that several ranks hold.
#pragma once
#include <cstddef>
#include <vector>

#include "plan/arena_range.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {

// The elements of a rank's parameter (and gradient) arena: the table padded to a multiple of
// 16 x `multiple` (the data-parallel size, so the distributed optimizer's slices stay aligned).
std::size_t padded_arena_size(const TensorTable& table, int multiple);

// The bucket layout of an arena: one range per group of tensors of one layer (the embedding before
// the first block, each block, the head after the last), from the group's first tensor to the next
// group's (alignment gaps included; the last to the arena's end). `layer` is -1 for the embedding
// and head. With a table aligned to 16 x dp (TensorTable's bucket_alignment) and an arena padded
// the same way, every bucket splits into dp equal, aligned slices.
struct BucketSpan {
  ArenaRange range;
  int layer;
};
std::vector<BucketSpan> gradient_buckets(const TensorTable& table, std::size_t arena_size);

// Arena ranges the optimizer of data-parallel rank r updates: everything, or (distributed) the r-th
// of the dp equal slices of every bucket.
std::vector<ArenaRange> optimizer_ranges(const std::vector<BucketSpan>& buckets, std::size_t arena_size, int dp, int r,
                                         bool distributed);

// Whether the rank at these coordinates is the one that counts a tensor in the gradient norm and
// writes it to checkpoints: replicas over tensor parallelism are counted by tp rank 0, and the tied
// embedding's copy on the last pipeline stage by the first stage.
bool counts_tensor(const TensorSpec& t, int tp_rank, bool last_stage_with_tied_copy);

}  // namespace dtrain
