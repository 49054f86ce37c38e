// Data-parallel gradient synchronisation in the rank plan's flat buckets, and the distributed
// optimizer's parameter gather. One bucket per transformer block (its tensors are contiguous in the
// arena) plus the embedding and head ranges. Without system.overlap_grad_reduce every bucket is reduced after the
// last micro-batch; with it, a block's bucket starts reducing (non-blocking) as soon as the block's
// backward has run for the last micro-batch. With system.use_distributed_optimizer (ZeRO-1) each
// bucket is reduce-scattered: data-parallel rank r owns the r-th of the dp equal slices of every
// bucket, updates it, and the slices are all-gathered back into full parameters.
// Before a bucket leaves, the gradients that are partial over tensor-parallel ranks (LayerNorm under
// sequence parallelism) are summed over the TP group, and the tied embedding over the embedding group.
// ZeRO-2 and 3 (plan.shards_grads()): a block's bucket is reduce-scattered as soon as its backward has
// run for the last micro-batch (blocking, unless overlapped), and then every gradient but the rank's
// slice is discarded (Arena::discard: the memory goes back until the next step writes it again).
#pragma once
#include <cstddef>
#include <vector>

#include "comm/parallel_state.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/arena.hpp"

namespace dtrain {

class GradSync {
 public:
  // The buckets, slices and partial-sum tensors of `plan`, over the rank's parameter and gradient arenas.
  GradSync(const RankPlan& plan, Arena& params, Arena& grads, const ParallelState& ps, bool overlap, int num_micro_batches);
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  void start_step();  // zeroes the gradients (under ZeRO-2/3 the owned slices; the rest is discarded)
  void block_backward_done(int layer);  // the model's backward hook
  // Completes every reduction. Afterwards the owned ranges hold gradients summed over data parallel.
  void finish();

  // Distributed optimizer: all-gather the updated slices. With overlap, wait_params(layer) before a
  // block's forward (the model's forward hook; -1 = embedding and head) and wait_all_params() before
  // anything else reads the parameters.
  void gather_params(bool overlap);
  void wait_params(int layer);
  void wait_all_params();

 private:
  struct Bucket {
    ArenaRange range;
    int layer;                            // -1 for the embedding and head ranges
    ArenaRange owned;                     // this rank's slice
    CommRequest grad_req, param_req;      // reductions and gathers in flight
    bool reduced = false;                 // this step's reduction has started
    bool settled = false;                 // and is complete (and, under ZeRO-2/3, the rest discarded)
  };
  void prepare(Bucket& b);           // tensor-parallel and embedding-group sums
  void start_reduce(Bucket& b, bool non_blocking);
  void settle(Bucket& b);            // waits for the reduction; discards what the rank does not own

  const RankPlan& plan_;
  Arena& params_;
  Arena& grads_;
  const ParallelState& ps_;
  bool overlap_, distributed_;
  int m_;
  std::vector<Bucket> buckets_;
  std::vector<int> backward_counts_;  // per bucket
};

}  // namespace dtrain
