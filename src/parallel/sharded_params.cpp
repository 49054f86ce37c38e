// ShardedParams: ZeRO-3's gather-use-discard cycle of parameter buckets, one bucket prefetched ahead.
#include "parallel/sharded_params.hpp"

#include <algorithm>

namespace dtrain {

ShardedParams::ShardedParams(const RankPlan& plan, Arena& params, const ParallelState& ps) : plan_(plan), params_(params), ps_(ps) {
  const auto slices = plan.packed_owned_slices();
  for (std::size_t i = 0; i < plan.buckets.size(); ++i)
    buckets_.push_back({plan.buckets[i].range, slices[i].owned, slices[i].packed, &ps.grad_group(plan.buckets[i]), {}, false});
  // The arena is on-demand memory. Frozen tensors (training.freeze, after the buckets) are whole on every
  // rank, backed from the start, and stay.
  const std::size_t each = plan_.compute_type_bytes();
  if (plan.has_frozen()) params_.commit(each * plan.grad_arena_size, each * plan.arena_size);
  if (plan.offload_params) {
    host_ = PinnedBuffer(params.device(), plan.optimizer_elements() * plan.compute_type_bytes());
    return;  // nothing of the buckets is backed until a gather (or write_owned) needs it
  }
  // The owned slices are backed from the start, and stay.
  for (const Bucket& b : buckets_) params_.commit(each * b.owned.begin, each * b.owned.end);
}

void ShardedParams::write_owned(const std::function<void(const ArenaRange&)>& write) {
  const std::size_t each = plan_.compute_type_bytes();
  if (plan_.has_frozen()) write({plan_.grad_arena_size, plan_.arena_size});  // the frozen tensors, kept whole
  for (Bucket& b : buckets_) {
    if (b.owned.begin >= b.owned.end) continue;
    if (!plan_.offload_params) {
      write(b.owned);
      continue;
    }
    b.gather.wait();
    params_.commit(each * b.owned.begin, each * b.owned.end);
    write(b.owned);
    slice_to_host(b);
    params_.discard(each * b.owned.begin, each * b.owned.end);
  }
}

void ShardedParams::slice_to_device(const Bucket& b) {
  const std::size_t each = plan_.compute_type_bytes();
  params_.commit(each * b.owned.begin, each * b.owned.end);
  params_.device().copy(params_.as<char>() + each * b.owned.begin, host_.as<char>() + each * b.stored, each * (b.owned.end - b.owned.begin));
}

void ShardedParams::slice_to_host(const Bucket& b) {
  const std::size_t each = plan_.compute_type_bytes();
  params_.device().copy(host_.as<char>() + each * b.stored, params_.as<char>() + each * b.owned.begin, each * (b.owned.end - b.owned.begin));
}

void ShardedParams::owned_to_device() {
  if (!plan_.offload_params) return;
  for (const Bucket& b : buckets_) slice_to_device(b);
}

void ShardedParams::owned_to_host() {
  if (!plan_.offload_params) return;
  const std::size_t each = plan_.compute_type_bytes();
  for (Bucket& b : buckets_) {
    b.gather.wait();
    slice_to_host(b);
    params_.discard(each * b.owned.begin, each * b.owned.end);
  }
}

void ShardedParams::start_gather(Bucket& b, Completion when) {
  b.whole = true;
  params_.commit(plan_.compute_type_bytes() * b.range.begin, plan_.compute_type_bytes() * b.range.end);
  if (plan_.offload_params) slice_to_device(b);
  Communicator& dp = *b.group;
  const std::size_t n = b.range.end - b.range.begin;
  if (dp.size() == 1 || n == 0) return;
  char* first = static_cast<char*>(params_.data()) + b.range.begin * plan_.compute_type_bytes();
  b.gather = dp.all_gather_in_place(first, n / static_cast<std::size_t>(dp.size()),
                                    storage_dtype(plan_.precision),
                                    {"all-gather ZeRO-3 parameters"}, when);
}

void ShardedParams::need(int i) {
  Bucket& b = buckets_[static_cast<std::size_t>(i)];
  if (!b.whole) start_gather(b, Completion::now);
  b.gather.wait();
}

void ShardedParams::prefetch(int i) {
  if (i < 0) return;
  Bucket& b = buckets_[static_cast<std::size_t>(i)];
  if (!b.whole) start_gather(b, Completion::later);
}

void ShardedParams::discard(Bucket& b) {
  b.gather.wait();
  if (!b.whole) return;
  b.whole = false;
  const std::size_t each = plan_.compute_type_bytes();
  if (plan_.offload_params) return params_.discard(each * b.range.begin, each * b.range.end);  // the slice is in host_
  params_.discard(each * b.range.begin, each * b.owned.begin);
  params_.discard(each * b.owned.end, each * b.range.end);
}

int ShardedParams::neighbour_bucket(int layer, int step) const {
  if (layer < 0) return -1;
  for (const auto& chunk : plan_.part.chunks) {
    const auto at = std::find(chunk.begin(), chunk.end(), layer);
    if (at == chunk.end()) continue;
    const long next = (at - chunk.begin()) + step;
    if (next < 0 || next >= static_cast<long>(chunk.size())) return -1;
    const auto found = buckets_of_layer(plan_.buckets, chunk[static_cast<std::size_t>(next)], plan_.shape.tied);
    return found.empty() ? -1 : found.front();
  }
  return -1;
}

void ShardedParams::on_layer(int layer, LayerPhase phase) {
  const std::vector<int> used = buckets_of_layer(plan_.buckets, layer, plan_.shape.tied);
  switch (phase) {
    case LayerPhase::before_forward:
    case LayerPhase::before_backward:
      for (int i : used) need(i);
      prefetch(neighbour_bucket(layer, phase == LayerPhase::before_forward ? 1 : -1));
      break;
    case LayerPhase::after_forward:
    case LayerPhase::after_backward:
    case LayerPhase::after_input_grad:
      for (int i : used) discard(buckets_[static_cast<std::size_t>(i)]);
      break;
    case LayerPhase::before_weight_grad:  // W reads no parameters
    case LayerPhase::after_weight_grad:
      break;
  }
}

void ShardedParams::discard_all() {
  for (auto& b : buckets_) discard(b);
}

}  // namespace dtrain
