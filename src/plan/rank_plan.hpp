// The per-rank plan: everything a rank will hold and do, computed once from the configuration, the
// training plan and the rank's coordinates, as a pure value (no MPI, no allocation but the tables).
// The trainer allocates from it, gradient synchronisation reduces its buckets, the optimizer updates
// its ranges, checkpoints write what it says this rank writes, --reshard plans every rank of another
// layout with it, and the dry run's memory report is its arithmetic: one source for all of them.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/activation_layout.hpp"
#include "plan/buckets.hpp"
#include "plan/rank_layout.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {

struct TrainingPlan;

struct MemoryEstimate {  // bytes on one rank
  std::size_t params = 0;      // the compute weights (fp32 or bf16)
  std::size_t grads = 0;       // fp32
  std::size_t optimizer = 0;   // AdamW moments (and the fp32 master weights of a bf16 run) of the owned ranges
  // system.offload_optimizer on a GPU: that state and its staging (the owned gradients and weights) in
  // host memory instead, not in total(); system.offload_params: the owned parameter slices. On the host
  // the two memories are one, so they stay in optimizer and params.
  std::size_t offloaded = 0;
  std::size_t activations = 0;
  std::size_t buffers = 0;  // the step's token batch, the pipeline's message buffers (an estimate) and
                            // MPI's temporaries of data-parallel reductions on the host
  std::size_t total() const;
  const char* biggest_term() const;  // "params", "grads", "optimizer", "activations" or "buffers"
};

struct RankPlan {
  Coords coords;
  ParallelLayout sizes;                       // zero: what is sharded over data parallelism (below)
  Precision precision = Precision::fp32;     // storage of the compute weights, activations and messages
  StagePart part;                             // model chunks of this pipeline stage
  TensorTable table;                          // tensors, their slices and arena offsets
  std::size_t arena_size = 0;                 // elements of the parameter arena
  // Elements of the gradient arena: the trainable tensors, the parameter arena's first part (all of it
  // without training.freeze); buckets and optimizer ranges lie in it, frozen tensors after it.
  std::size_t grad_arena_size = 0;
  // Elements after the gradient arena: the frozen tensors (training.freeze) this rank holds, and padding.
  std::size_t frozen_elements() const { return arena_size - grad_arena_size; }
  bool has_frozen() const { return frozen_elements() > 0; }
  std::vector<BucketSpan> buckets;            // gradient buckets over the gradient arena
  std::vector<ArenaRange> optimizer_ranges;   // what this rank's optimizer updates and keeps moments of
  std::vector<char> counted;                  // per tensor: counted here (gradient norm, checkpoints)
  std::vector<int> sequence_parallel_tensors;  // tensors whose gradients are partial over TP (norms with SP, qk norms)
  int tied_embedding = -1;                    // wte, when the other end of the pipeline holds a copy
  // zbv's stage 0 holds the embedding and the tied LM head: the head's gradient goes to a buffer of its
  // own (Vl x C fp32), added to wte's after the step's backward passes, as the embedding group adds the
  // two stages' copies at pp > 1: the sum does not depend on the order of the two chunks' Ws.
  bool separate_tied_head = false;
  ActivationLayout activations;
  int micro_batches = 1;                      // m: the step's micro-batches this rank holds tokens for
  ModelShape shape{};                         // the model's architecture (norm, positions, MLP, heads)
  bool host_reductions = false;  // data-parallel reductions run in MPI on host memory (device = cpu)
  bool async_snapshot = false;   // checkpoint.async_save: a host copy of what the rank writes
  bool offload_optimizer = false;  // AdamW's state in host memory (system.offload_optimizer)
  bool offload_params = false;     // ZeRO-3's owned parameter slices in host memory (system.offload_params)
  // The groups buckets are reduced and sharded over: dense over data parallelism, experts over
  // expert data parallelism (cp x dp / ep ranks).
  GradientGroups groups{};

  // The ranks holding the same parameters (dp x cp, RankLayout::replica_group_of): dense gradients are
  // reduced and the distributed optimizer shards over them (groups.dense).
  int replicas() const { return groups.dense.size; }
  // What is sharded over data parallelism (sizes.zero: system.zero_stage under the distributed
  // optimizer, else 0): 1 the optimizer state, 2 also the reduced gradients (a bucket is whole only
  // while it accumulates), 3 also the parameters (a bucket is whole only while a block's forward or
  // backward uses it).
  int zero_stage() const { return sizes.zero; }
  bool distributed_optimizer() const { return sizes.distributed_optimizer(); }
  bool shards_grads() const { return zero_stage() >= 2; }
  bool shards_params() const { return zero_stage() >= 3; }
  // The arena ranges whose parameters this rank keeps between steps: all of it, or (ZeRO-3) its
  // optimizer ranges and the frozen tensors (training.freeze; not sharded).
  std::vector<ArenaRange> param_ranges() const;
  // Per bucket (in `buckets` order): the rank's slice of it over its group, and where that slice starts
  // when the slices lie back to back (the packing of the optimizer ranges, which ZeRO-2's accumulator and
  // ZeRO-3's offloaded parameters share).
  struct PackedSlice {
    ArenaRange owned;
    std::size_t packed;
  };
  std::vector<PackedSlice> packed_owned_slices() const;

  // Checkpoint writers: whole parameter tensors from rank 0 of the tensor's gradient group (the
  // data- and context-parallel replicas; the expert-data-parallel group for experts; frozen tensors
  // always), unless ZeRO-3 shards them: then,
  // like the moments, each owner writes its slices; optimizer moments from every rank of the group
  // under the distributed optimizer (each its slices), else from its rank 0. The gradient norm counts
  // the optimizer ranges of the tensors whose moments a rank writes: every element once over the
  // world. Indices are table order.
  bool first_replica(std::size_t tensor) const { return (table.tensors()[tensor].expert ? groups.expert : groups.dense).rank == 0; }
  bool writes_params(std::size_t tensor) const {
    return (!shards_params() || !table.tensors()[tensor].trainable) && first_replica(tensor) && counted[tensor];
  }
  bool writes_moments(std::size_t tensor) const {
    return table.tensors()[tensor].trainable && (distributed_optimizer() || first_replica(tensor)) && counted[tensor];
  }
  std::size_t optimizer_elements() const { return total_elements(optimizer_ranges); }
  std::size_t compute_type_bytes() const { return is_16bit(precision) ? 2 : 4; }
  MemoryEstimate memory() const;
  // Sizes of the rank's buckets in elements: the embedding's (front), the head's (back), blocks.
  struct BucketSizes {
    std::size_t front = 0, back = 0, largest_block = 0, blocks = 0;
  };
  BucketSizes bucket_sizes() const;
  // Elements of parameters (ZeRO-3) and gradients (ZeRO-2/3) resident at most: the owned slices and
  // the buckets whole at the same time. gathered_params: the buckets whole at the same time (ZeRO-3).
  std::size_t resident_params() const;
  std::size_t gathered_params() const;
  std::size_t resident_grads() const;
  // Elements of the checkpoint pieces this rank writes (ckpt/shard.cpp's for_each_piece): whole
  // parameter tensors, and per optimizer range the moments and the parameters or master weights.
  std::size_t checkpoint_elements() const;
  // Elements of the largest single collective or transfer of a step: a gradient bucket, or a full
  // (N, C) activation of the tensor-parallel collectives. MPI counts are ints, so it must fit one.
  std::size_t largest_message() const;
};

// The activation shapes one rank sees in one micro-batch of `micro_batch` samples under `sizes`
// (sequence_parallel: the norms' rows sharded over tp; cp_rank: which zig-zag chunks the rank holds):
// the one description of per-rank shapes, which the activation layout and the cost model both use.
ActivationDims activation_dims(const Config& cfg, const ParallelLayout& sizes, int micro_batch, bool sequence_parallel, int cp_rank);

// The plan of the rank at `coords` under `plan`.
RankPlan make_rank_plan(const Config& cfg, const TrainingPlan& plan, const Coords& coords);

// The whole model on one rank with `micro_batch` samples per pass and one activation slot
// (generation, reference tests, benchmarks).
RankPlan whole_model_plan(const Config& cfg, int micro_batch);

}  // namespace dtrain
