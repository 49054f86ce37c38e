// Data-parallel gradient synchronisation in the rank plan's flat buckets, and the distributed
// optimizer's parameter gather. One bucket per transformer block (its tensors are contiguous in the
// arena) plus the embedding and head ranges. Without system.overlap_grad_reduce every bucket is reduced after the
// last micro-batch; with it, a block's bucket starts reducing (non-blocking) as soon as the block's
// backward has run for the last micro-batch. With system.use_distributed_optimizer (ZeRO-1) each
// bucket is reduce-scattered: data-parallel rank r owns the r-th of the dp equal slices of every
// bucket, updates it, and the slices are all-gathered back into full parameters. A block's expert
// tensors are a bucket of their own, reduced (and sliced) the same way over the expert-data-parallel
// group: the ranks holding the same experts.
// Before a bucket leaves, the gradients that are partial over tensor-parallel ranks (LayerNorm under
// sequence parallelism) are summed over the TP group, and the tied embedding over the embedding group.
// ZeRO-2 and 3 (plan.shards_grads()): a block's bucket is reduce-scattered after every micro-batch's
// backward of the block (blocking, unless overlapped; an overlapped one completes before the block's
// next backward), the rank's slice is added to an accumulator of the owned slices (when m > 1), and
// the bucket is discarded (Arena::discard: the memory goes back until a backward writes it again);
// after the last micro-batch the slice takes the accumulated sum. Summing per micro-batch and then over
// them rounds differently from ZeRO-1's order (accumulate, then reduce) when m > 1: within 1e-6.
#pragma once
#include <cstddef>
#include <functional>
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
  void block_backward_begin(int layer);  // the model's hooks: before a block's backward,
  void block_backward_done(int layer);   // and after it
  // Completes every reduction. Afterwards the owned ranges hold gradients summed over data parallel.
  void finish();

  // Distributed optimizer: all-gather the updated slices. With overlap, wait_params(layer) before a
  // block's forward (the model's forward hook; -1 = embedding and head) and wait_all_params() before
  // anything else reads the parameters.
  void gather_params(bool overlap);
  void wait_params(int layer);
  void wait_all_params();
  // ZeRO-2/3 (the gradient arena is on-demand memory): backs the owned slices, which are backed from
  // construction on; again after the whole arena was discarded.
  void commit_owned();
  // Called with the arena range a bucket's final gradients of the step cover for this rank's optimizer
  // (its owned slice under the distributed optimizer, else the bucket) as soon as they are final: the
  // offloaded optimizer starts copying them to the host.
  void on_final(std::function<void(ArenaRange)> hook) { on_final_ = std::move(hook); }

 private:
  struct Bucket {
    ArenaRange range;
    int layer;                            // -1 for the embedding and head ranges
    Communicator* group;                  // dp, or edp for a block's experts
    ArenaRange owned;                     // this rank's slice over the group
    std::size_t packed = 0;               // where the slice sits in the accumulator (ZeRO-2/3, m > 1)
    CommRequest grad_req, param_req;      // reductions and gathers in flight
    int backward_count = 0;               // micro-batches whose backward of the block is done
    bool reduced = false;                 // the current reduction has started
    bool settled = false;                 // and is complete (and, under ZeRO-2/3, the rest discarded)
  };
  void prepare(Bucket& b);           // tensor-parallel and embedding-group sums
  void start_reduce(Bucket& b, bool non_blocking);
  void settle(Bucket& b);            // waits for the reduction; discards what the rank does not own
  void commit(const Bucket& b);      // ZeRO-2/3: the whole bucket backed, before a backward adds to it

  const RankPlan& plan_;
  Arena& params_;
  Arena& grads_;
  const ParallelState& ps_;
  bool overlap_, distributed_;
  int m_;
  std::vector<Bucket> buckets_;
  Arena accumulated_;  // ZeRO-2/3 with m > 1: the owned slices summed over the step's micro-batches so far
  std::function<void(ArenaRange)> on_final_;
};

}  // namespace dtrain
