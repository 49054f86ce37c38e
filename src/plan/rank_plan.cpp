// make_rank_plan: the table, the arena cuts and the activation layout of one rank.
#include "plan/rank_plan.hpp"

#include <algorithm>

#include "plan/pipeline_schedule.hpp"
#include "plan/training_plan.hpp"

namespace dtrain {

std::size_t MemoryEstimate::total() const {
  constexpr std::size_t kMax = static_cast<std::size_t>(-1) / 2;
  std::size_t sum = 0;
  for (std::size_t x : {params, grads, optimizer, activations, buffers}) sum = sum > kMax - x ? kMax : sum + x;
  return sum;
}

const char* MemoryEstimate::biggest_term() const {
  const char* name = "params";
  std::size_t most = params;
  if (grads > most) most = grads, name = "grads";
  if (optimizer > most) most = optimizer, name = "optimizer";
  if (activations > most) most = activations, name = "activations";
  if (buffers > most) name = "buffers";
  return name;
}

MemoryEstimate RankPlan::memory() const {
  constexpr std::size_t kMax = static_cast<std::size_t>(-1) / 8;
  auto bytes = [](std::size_t n, std::size_t each) { return n > kMax ? kMax * each : n * each; };
  const std::size_t compute = compute_type_bytes();
  MemoryEstimate e;
  e.params = bytes(shards_params() ? resident_params() + frozen_elements() : arena_size, compute);
  e.grads = bytes(shards_grads() ? resident_grads() : grad_arena_size, 4);
  if (separate_tied_head) e.grads += bytes(static_cast<std::size_t>(activations.dims.Vl) * static_cast<std::size_t>(activations.dims.C), 4);
  // AdamW first and second moments, and in a bf16 run the fp32 master weights, of the owned ranges;
  // offloaded, also the host copies of the owned gradients (fp32) and weights (compute type; not with
  // offloaded parameters, which the update reads where they live).
  const std::size_t state = (is_16bit(precision) ? 3 : 2) * bytes(optimizer_elements(), 4);
  const std::size_t offload = offload_optimizer ? state + bytes(optimizer_elements(), 4 + (offload_params ? 0 : compute)) : 0;
  e.optimizer = !offload_optimizer ? state : host_reductions ? offload : 0;  // host_reductions: the device is the host
  if (offload_optimizer && !host_reductions) e.offloaded = offload;
  // Offloaded parameter slices (compute type) in host memory.
  const std::size_t slices = offload_params ? bytes(optimizer_elements(), compute) : 0;
  if (host_reductions) e.params += slices;
  else e.offloaded += slices;
  e.activations = activations.bytes();
  // Tokens and targets of every micro-batch (ints), the received gradient, and the outbox: a stage
  // has about as many sends in flight as activations (measured far below that; not a bound).
  const ActivationDims& d = activations.dims;
  const std::size_t tokens = 2 * static_cast<std::size_t>(micro_batches) * static_cast<std::size_t>(d.N());
  const std::size_t message = static_cast<std::size_t>(d.Ns()) * static_cast<std::size_t>(d.C);
  const std::size_t messages = sizes.pp > 1 ? static_cast<std::size_t>(activations.slots) + 2 : 1;
  e.buffers = bytes(tokens, 4) + bytes(messages * message, compute);
  // An asynchronous save's host snapshot: the pieces the rank writes.
  if (async_snapshot) e.buffers += bytes(checkpoint_elements(), 4);
  // Open MPI 4.1 (host buffers) takes temporaries of twice a reduce-scatter's buffer and half an
  // all-reduce's (measured with VmHWM on one 196 MiB bucket at 4 ranks: +393 and +98 MiB); the
  // largest bucket sets the peak. NCCL and the all-gathers take none.
  if (host_reductions && replicas() > 1) {
    std::size_t largest = 0;
    for (const auto& b : buckets) largest = std::max(largest, b.range.end - b.range.begin);
    e.buffers += distributed_optimizer() ? bytes(2 * largest, 4) : bytes(largest / 2, 4);
  }
  return e;
}

namespace {

// Elements of a bucket that a replica does not own (all but its 1/replicas slice).
std::size_t unowned(std::size_t bucket, int replicas) { return bucket - bucket / static_cast<std::size_t>(replicas); }

}  // namespace

RankPlan::BucketSizes RankPlan::bucket_sizes() const {
  BucketSizes b;
  const std::size_t n = buckets.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t size = buckets[i].range.end - buckets[i].range.begin;
    if (buckets[i].layer >= 0) {
      b.largest_block = std::max(b.largest_block, size);
      b.blocks += size;
    } else if (buckets[i].layer == kEmbeddingLayer) {
      b.front = size;
    } else {
      b.back = size;
    }
  }
  return b;
}

std::size_t RankPlan::gathered_params() const {
  // Whole at once: a block and the next one prefetched (with full recomputation, a replayed group and
  // one more), or the head's buckets (the tied embedding included), or the embedding's.
  const BucketSizes b = bucket_sizes();
  std::size_t group = 1;
  for (const auto& [begin, end] : activations.recompute_groups()) group = std::max(group, static_cast<std::size_t>(end - begin));
  return std::max({(group + 1) * b.largest_block, b.back + (shape.tied ? b.front : 0), b.front});
}

std::size_t RankPlan::resident_params() const {
  // Offloaded, the owned slices are in the device's memory only inside gathered buckets.
  if (offload_params) return gathered_params();
  return optimizer_elements() + unowned(gathered_params(), replicas());
}

std::size_t RankPlan::resident_grads() const {
  // The owned slices (and their accumulator over several micro-batches); whole at once: the
  // embedding's and the head's buckets during the whole backward pass (reduced at its end), and a
  // block's bucket from its backward to its reduction, the next block's already started (two).
  const BucketSizes b = bucket_sizes();
  const std::size_t owned = optimizer_elements() * (micro_batches > 1 ? 2 : 1);
  return owned + unowned(b.front + b.back + std::min(2 * b.largest_block, b.blocks), replicas());
}

std::size_t RankPlan::checkpoint_elements() const {
  const bool range_params = is_16bit(precision) || shards_params();
  std::size_t n = 0;
  const auto& tensors = table.tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    if ((!range_params || !t.trainable) && writes_params(i)) n += t.numel;  // frozen: whole, from the parameters
    if (!writes_moments(i)) continue;
    for (const auto& r : optimizer_ranges) {
      const std::size_t lo = std::max(r.begin, t.offset), hi = std::min(r.end, t.offset + t.numel);
      if (lo < hi) n += (range_params ? 3 : 2) * (hi - lo);
    }
  }
  return n;
}

std::vector<RankPlan::PackedSlice> RankPlan::packed_owned_slices() const {
  std::vector<PackedSlice> out;
  std::size_t packed = 0;
  for (const auto& span : buckets) {
    const ArenaRange owned = owned_slice(span, groups.of(span));
    out.push_back({owned, packed});
    packed += owned.end - owned.begin;
  }
  return out;
}

std::vector<ArenaRange> RankPlan::param_ranges() const {
  if (!shards_params()) return {{0, arena_size}};
  std::vector<ArenaRange> kept = optimizer_ranges;
  if (has_frozen()) kept.push_back({grad_arena_size, arena_size});  // frozen tensors: whole on every rank
  return kept;
}

std::size_t RankPlan::largest_message() const {
  std::size_t most = static_cast<std::size_t>(activations.dims.N()) * static_cast<std::size_t>(activations.dims.C);
  for (const auto& b : buckets) most = std::max(most, b.range.end - b.range.begin);
  return most;
}

ActivationDims activation_dims(const Config& cfg, const ParallelLayout& s, int micro_batch, bool sequence_parallel, int cp_rank) {
  const auto& m = cfg.model;
  ActivationDims d{micro_batch,          m.seq_length / s.cp,     m.hidden_size,          m.num_attention_heads * cfg.head_dim() / s.tp,
                   m.num_attention_heads / s.tp, m.kv_heads() / s.tp, cfg.ffn_hidden() / s.tp, m.vocab_size / s.tp,
                   sequence_parallel ? s.tp : 1, m.swiglu,        s.cp,                   cp_rank};
  d.tp = s.tp;
  if (m.num_experts > 0) {
    d.E = m.num_experts;
    d.K = m.moe_router_topk;
    d.Fe = cfg.moe_ffn_hidden() / s.tp;
    d.ep = s.ep;
  }
  return d;
}

RankPlan make_rank_plan(const Config& cfg, const TrainingPlan& plan, const Coords& c) {
  const ParallelLayout& s = plan.sizes;
  const int v = plan.sizes.v;
  const PipelineSplit split = PipelineSplit::of(cfg, s.pp, v);
  const StagePart part = stage_part(split, c.pp);
  const ModelShape shape = ModelShape::from(cfg);
  const int replicas = s.replicas();
  RankPlan r{c, s, cfg.system.precision, part,
             TensorTable(shape, part, s.tp, c.tp, 16 * static_cast<std::size_t>(replicas), s.ep, s.ep_rank(c)),
             0, 0, {}, {}, {}, {}, -1, false, {}};
  r.arena_size = padded_arena_size(r.table, replicas);
  r.grad_arena_size = padded_gradient_size(r.table, replicas);
  r.buckets = gradient_buckets(r.table, r.grad_arena_size);
  r.groups = {{replicas, s.replica(c)}, {s.edp(), s.edp_rank(c)}};
  r.optimizer_ranges = optimizer_ranges(r.buckets, r.grad_arena_size, r.groups, r.distributed_optimizer());
  const bool sp = cfg.system.sequence_parallel && s.tp > 1;
  const auto& tensors = r.table.tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    r.counted.push_back(counts_tensor(t, c.tp, s.pp > 1 && c.pp == s.pp - 1) ? 1 : 0);
    const auto dot = t.name.rfind('.');
    const std::string base = dot == std::string::npos ? t.name : t.name.substr(dot + 1);
    // Gradients partial over tp: the norms' with sequence parallelism (each rank's rows), the heads'
    // norms always (each rank's heads).
    if (!t.trainable) continue;  // no gradient
    if ((sp && base.rfind("ln", 0) == 0) || (s.tp > 1 && (base == "qnorm_w" || base == "knorm_w")))
      r.sequence_parallel_tensors.push_back(static_cast<int>(i));
    if (t.name == "wte" && s.pp > 1 && shape.tied && !split.v_shape) r.tied_embedding = static_cast<int>(i);
  }
  const auto& m = cfg.model;
  r.activations.dims = activation_dims(cfg, s, plan.micro_batch, sp, c.cp);
  r.activations.blocks_per_slot = split.chunk_blocks(c.pp);
  if (m.num_experts > 0) {
    r.activations.mlp_kinds.assign(static_cast<std::size_t>(r.activations.blocks_per_slot), 0);
    for (const auto& chunk : part.chunks)
      for (std::size_t i = 0; i < chunk.size(); ++i) r.activations.mlp_kinds[i] |= shape.moe(chunk[i]) ? kMoeMlp : kDenseMlp;
  }
  r.activations.head = r.part.head;
  const TensorSpec* wte = r.table.find("wte");
  r.separate_tied_head = split.v_shape && shape.tied && part.head && part.embedding && s.pp > 1 && wte && wte->trainable;
  r.activations.slots = max_in_flight(plan.schedule, s.pp, plan.num_micro_batches, v, c.pp);
  r.activations.precision = cfg.system.precision;
  r.activations.recompute = m.recompute_granularity;
  r.activations.recompute_method = m.recompute_method;
  r.activations.recompute_layers = m.recompute_num_layers;
  r.activations.split_backward = splits_backward(plan.schedule);
  r.activations.qk_norm = m.qk_layernorm;
  r.micro_batches = plan.num_micro_batches;
  r.shape = shape;
  r.host_reductions = cfg.system.device == ComputeDevice::cpu;
  r.async_snapshot = cfg.checkpoint.async_save;
  r.offload_optimizer = cfg.system.offload_optimizer;
  r.offload_params = cfg.system.offload_params;
  return r;
}

RankPlan whole_model_plan(const Config& cfg, int micro_batch) {
  TrainingPlan one;
  one.micro_batch = micro_batch;
  one.num_micro_batches = 1;
  Config single = cfg;
  single.system.sequence_parallel = false;
  single.system.use_distributed_optimizer = false;
  single.system.pipeline_first_stage_layers = single.system.pipeline_last_stage_layers = 0;  // one stage: every block
  single.system.pipeline_account_for_embedding = single.system.pipeline_account_for_loss = false;
  return make_rank_plan(single, one, Coords{});
}

}  // namespace dtrain
