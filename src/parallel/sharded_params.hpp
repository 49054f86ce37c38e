// ZeRO-3 parameter residency: between uses, a rank keeps only its slice of every bucket of the
// parameter arena (its optimizer ranges); the rest of the arena is discarded memory. Before a layer's
// forward or backward the buckets it reads are all-gathered in place (the one blocking gather of a
// bucket not yet whole), the next layer of the pass is prefetched one ahead (a non-blocking gather, as
// FSDP does), and after the use the bucket is discarded again. The gathered values are those the
// distributed optimizer's all-gather would give, so ZeRO-3 trains exactly as ZeRO-1 does.
// Every data-parallel rank of a stage runs the same schedule, so the gathers reach the data-parallel
// communicator in the same order everywhere.
// Parameter offload (plan.offload_params): between uses the owned slices live in host memory (pinned on
// a GPU; on the host backend a second host buffer stands in, so the bookkeeping runs in CI), back to
// back in bucket order, and the whole bucket is discarded after a use. A gather first copies the slice
// to its place in the bucket. New values of the owned slices (initial weights, a loaded checkpoint) go
// through write_owned(), a bucket at a time, so the device never holds more than one bucket's slice for
// them; code that reads or updates the slices in the arena (the optimizer step, checkpoints) brackets
// itself with owned_to_device() and owned_to_host().
#pragma once
#include <functional>
#include <vector>

#include "comm/parallel_state.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/arena.hpp"
#include "runtime/device.hpp"

namespace dtrain {

class ShardedParams {
 public:
  ShardedParams(const RankPlan& plan, Arena& params, const ParallelState& ps);
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  // The model's layer hook (GptModel::set_layer_hook).
  void on_layer(int layer, LayerPhase phase);
  // Completes every gather and discards the gathered buckets (their copies are stale after the
  // optimizer step). Parameters are only ever set over the owned slices (plan.param_ranges()), so a
  // bucket not gathered holds nothing else.
  void discard_all();
  // Parameter offload: the owned slices from host memory into the arena, and back (copied, then the
  // arena's slices discarded). No-ops without offload.
  void owned_to_device();
  void owned_to_host();
  // New values for the owned slices: write(owned) sets the arena's elements of `owned` (a bucket's slice;
  // first the frozen tensors, training.freeze, which every rank keeps whole in the arena).
  // With parameter offload one bucket at a time: its slice backed, written, copied to host memory and
  // discarded; without, in place.
  void write_owned(const std::function<void(const ArenaRange& owned)>& write);
  // Parameter offload: the owned slices in host memory, compute type, back to back in bucket order (the
  // packing of the optimizer ranges); null without offload.
  void* host_slices() { return host_.as<void>(); }

 private:
  struct Bucket {
    ArenaRange range, owned;
    std::size_t stored;     // offloaded: where the owned slice starts in host_ (elements)
    Communicator* group;    // dp, or edp for a block's experts
    CommRequest gather;     // a prefetch in flight
    bool whole = false;     // gathered (or being gathered)
  };
  void need(int bucket);      // whole when it returns
  void prefetch(int bucket);  // starts a non-blocking gather unless whole
  void start_gather(Bucket& b, Completion when);
  void discard(Bucket& b);
  int neighbour_bucket(int layer, int step) const;  // the bucket of the layer `step` away in its chunk, or -1
  // Offloaded: the owned slice of b between the arena and host memory.
  void slice_to_device(const Bucket& b);
  void slice_to_host(const Bucket& b);

  const RankPlan& plan_;
  Arena& params_;
  const ParallelState& ps_;
  std::vector<Bucket> buckets_;
  PinnedBuffer host_;  // offloaded owned slices, compute type (empty without offload)
};

}  // namespace dtrain
