// Data-parallel gradient synchronisation in flat buckets, and the distributed optimizer's parameter
// gather. One bucket per transformer block (its tensors are contiguous in the arena) plus the
// embedding and head ranges. Without system.overlap_grad_reduce every bucket is reduced after the
// last micro-batch; with it, a block's bucket starts reducing (non-blocking) as soon as the block's
// backward has run for the last micro-batch. With system.use_distributed_optimizer (ZeRO-1) each
// bucket is reduce-scattered: data-parallel rank r owns the r-th slice of every bucket, updates it,
// and the slices are all-gathered back into full parameters.
// Before a bucket leaves, the gradients that are partial over tensor-parallel ranks (LayerNorm under
// sequence parallelism) are summed over the TP group, and the tied embedding over the embedding group.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "model/gpt.hpp"
#include "runtime/parallel_state.hpp"

namespace dtrain {

// The bucket layout of an arena, a pure function of the tensor table: [0, first block) for the
// embeddings, one range per block (alignment gaps included), [end of last block, arena end) for the
// head. `layer` is -1 for the first and last.
struct BucketSpan {
  ArenaRange range;
  int layer;
};
std::vector<BucketSpan> gradient_buckets(const TensorTable& table, std::size_t arena_size);
// Data-parallel rank r's slice of a range of n elements: counts split as evenly as possible.
std::vector<int> slice_counts(std::size_t n, int dp);
// Arena ranges the optimizer of data-parallel rank r updates: everything, or (distributed) its
// slice of every bucket.
std::vector<ArenaRange> optimizer_ranges(const std::vector<BucketSpan>& buckets, std::size_t arena_size, int dp, int r,
                                         bool distributed);
// Whether a rank at these coordinates is the one that counts a tensor (replicas over TP and the tied
// embedding's copy on the last stage are counted elsewhere).
bool counts_tensor(const TensorSpec& t, int tp_rank, bool last_stage_with_tied_copy);

class GradSync {
 public:
  GradSync(GptModel& model, const ParallelState& ps, bool overlap, bool distributed, int num_micro_batches);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  void start_step();
  void block_backward_done(int layer);  // the model's backward hook
  // Completes every reduction. Afterwards the owned ranges hold gradients summed over data parallel.
  void finish();
  // Arena ranges this rank's optimizer updates (everything, or its slices of every bucket).
  const std::vector<ArenaRange>& owned() const { return owned_; }
  bool counts_for_norm(const TensorSpec& t) const;  // false for copies another rank counts

  // Distributed optimizer: all-gather the updated slices. With overlap, wait_params(layer) before a
  // block's forward (the model's forward hook; -1 = embedding and head) and wait_all_params() before
  // anything else reads the parameters.
  void gather_params(bool overlap);
  void wait_params(int layer);
  void wait_all_params();

 private:
  struct Bucket {
    ArenaRange range;
    int layer;                       // -1 for the embedding and head ranges
    std::vector<int> counts, displs;  // per data-parallel rank slice (distributed optimizer)
    MPI_Request grad_req = MPI_REQUEST_NULL, param_req = MPI_REQUEST_NULL;
  };
  void prepare(Bucket& b);           // tensor-parallel and embedding-group sums
  void start_reduce(Bucket& b, bool non_blocking);

  GptModel& model_;
  const ParallelState& ps_;
  bool overlap_, distributed_;
  int m_;
  std::vector<Bucket> buckets_;
  std::vector<int> backward_counts_;  // per bucket
  std::vector<ArenaRange> owned_;
  std::vector<const TensorSpec*> sp_tensors_;  // gradients partial over TP (sequence parallelism)
  const TensorSpec* tied_wte_ = nullptr;       // the embedding copy shared with the other end of the pipeline
};

}  // namespace dtrain
