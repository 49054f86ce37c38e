// How a rank's gradient arena is cut for data parallelism, as pure functions of its tensor table:
// the buckets reduced together, the slices the distributed optimizer gives each data-parallel rank,
// and which rank counts (and writes to checkpoints) a tensor that several ranks hold.
#pragma once
#include <cstddef>
#include <vector>

#include "plan/arena_range.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {

// The elements of a rank's parameter arena, and of its gradient arena (the trainable tensors, the
// table's prefix): padded to a multiple of 16 x `multiple` (the data-parallel size, so the distributed
// optimizer's slices stay aligned). The two are equal when no tensor is frozen.
std::size_t padded_arena_size(const TensorTable& table, int multiple);
std::size_t padded_gradient_size(const TensorTable& table, int multiple);

// The bucket layout of a gradient arena: one range per group of trainable tensors of one layer (the embedding before
// the first block, each block, the head after the last), a block's expert tensors a group of their
// own (they are reduced over another group), from the group's first tensor to the next group's
// (alignment gaps included; the last to the arena's end). `layer` is bucket_layer's.
// With a table aligned to 16 x dp (TensorTable's bucket_alignment) and an arena padded the same way,
// every bucket splits into dp equal, aligned slices, and so into edp (a divisor of dp x cp) slices.
struct BucketSpan {
  ArenaRange range;
  int layer;            // a block, kEmbeddingLayer or kHeadLayer (below)
  bool expert = false;  // the bucket of a block's experts
};
std::vector<BucketSpan> gradient_buckets(const TensorTable& table, std::size_t arena_size);

// The group a bucket's gradients are reduced and sharded over, and this rank's place in it: the
// data-parallel group for dense buckets, the expert-data-parallel group for expert buckets.
struct SliceGroup {
  int size = 1, rank = 0;
};
struct GradientGroups {
  SliceGroup dense, expert;
  const SliceGroup& of(const BucketSpan& b) const { return b.expert ? expert : dense; }
};

// The g.rank-th of the g.size equal slices of a bucket: what that rank of the bucket's group owns
// under the distributed optimizer.
ArenaRange owned_slice(const BucketSpan& bucket, const SliceGroup& g);

// Arena ranges the optimizer of a rank updates: everything, or (distributed) its owned slice of
// every bucket over the bucket's group.
std::vector<ArenaRange> optimizer_ranges(const std::vector<BucketSpan>& buckets, std::size_t arena_size, const GradientGroups& groups,
                                         bool distributed);

// Layer codes of the model's hooks besides blocks (global layer index): the embedding and the head.
constexpr int kEmbeddingLayer = -1;
constexpr int kHeadLayer = -2;
// A split backward (zero-bubble schedules) announces before_backward and after_input_grad around a
// layer's B (its parameters are read), then before_weight_grad and after_weight_grad around its W (the
// gradients are written; the parameters are not read), where a whole backward announces before_backward
// and after_backward.
enum class LayerPhase { before_forward, after_forward, before_backward, after_backward, after_input_grad, before_weight_grad, after_weight_grad };

// The bucket group of a tensor: its block, kEmbeddingLayer for wte and wpe (on a last stage, the tied
// head's copy of wte), kHeadLayer for the final norm and lm_head. A group starts a new bucket.
int bucket_layer(const TensorSpec& t);

// Indices of the buckets holding the parameters `layer` reads: a block's own bucket; for the
// embedding, the embedding's (wte, wpe); for the head, the head's (lnf, lm_head) and, when tied, the
// embedding's (wte). Empty when the stage has no such layer.
std::vector<int> buckets_of_layer(const std::vector<BucketSpan>& buckets, int layer, bool tied);

// Whether the rank at these coordinates is the one that counts a tensor in the gradient norm and
// writes it to checkpoints: replicas over tensor parallelism are counted by tp rank 0, and the tied
// embedding's copy on the last pipeline stage by the first stage.
bool counts_tensor(const TensorSpec& t, int tp_rank, bool last_stage_with_tied_copy);

}  // namespace dtrain
