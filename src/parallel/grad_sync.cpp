// GradSync: bucketed reductions (blocking, or started as soon as a bucket is ready), the distributed
// optimizer's reduce-scatter and parameter all-gather, through the communication layer.
#include "parallel/grad_sync.hpp"

#include <algorithm>

#include "kernels/kernels.hpp"

namespace dtrain {

GradSync::GradSync(const RankPlan& plan, Arena& params, Arena& grads, const ParallelState& ps, bool overlap, int m)
    : plan_(plan), params_(params), grads_(grads), ps_(ps), overlap_(overlap), distributed_(plan.distributed_optimizer()), m_(m) {
  const auto slices = plan.packed_owned_slices();
  for (std::size_t i = 0; i < plan.buckets.size(); ++i) {
    const BucketSpan& span = plan.buckets[i];
    Bucket b;
    b.range = span.range;
    b.layer = span.layer;
    b.group = &ps.grad_group(span);
    b.owned = slices[i].owned;
    b.packed = slices[i].packed;
    buckets_.push_back(std::move(b));
  }
  if (plan.shards_grads() && m > 1) accumulated_ = Arena(grads.device(), plan.optimizer_elements() * sizeof(float));
  commit_owned();
}

void GradSync::commit_owned() {
  if (!plan_.shards_grads()) return;
  for (const auto& b : buckets_) grads_.commit(sizeof(float) * b.owned.begin, sizeof(float) * b.owned.end);
}

void GradSync::commit(const Bucket& b) {
  if (plan_.shards_grads()) grads_.commit(sizeof(float) * b.range.begin, sizeof(float) * b.range.end);
}

void GradSync::start_step() {
  for (auto& b : buckets_) {
    b.backward_count = 0;
    b.reduced = b.settled = false;
  }
  if (!plan_.shards_grads()) {
    grads_.zero();
    return;
  }
  for (const auto& b : buckets_) {
    grads_.device().zero(grads_.as<float>() + b.owned.begin, sizeof(float) * (b.owned.end - b.owned.begin));
    if (b.layer < 0) commit(b);  // the embedding's and head's: written from the first backward on
  }
}

void GradSync::prepare(Bucket& b) {
  float* g = grads_.as<float>();
  const auto& tensors = plan_.table.tensors();
  auto in_bucket = [&](const TensorSpec* t) { return t && t->offset >= b.range.begin && t->offset < b.range.end; };
  for (int i : plan_.sequence_parallel_tensors) {
    const TensorSpec* t = &tensors[static_cast<std::size_t>(i)];
    if (in_bucket(t))
      ps_.tp().all_reduce(g + t->offset, t->numel, DType::f32, ReduceOp::sum, {"allreduce sequence-parallel LayerNorm gradients"});
  }
  // The tied embedding lives on the first and the last stage; both copies get the summed gradient.
  const TensorSpec* wte = plan_.tied_embedding >= 0 ? &tensors[static_cast<std::size_t>(plan_.tied_embedding)] : nullptr;
  if (in_bucket(wte))
    ps_.embedding()->all_reduce(g + wte->offset, wte->numel, DType::f32, ReduceOp::sum, {"allreduce tied-embedding gradients"});
}

void GradSync::start_reduce(Bucket& b, bool non_blocking) {
  b.reduced = true;
  prepare(b);
  Communicator& dp = *b.group;
  const std::size_t n = b.range.end - b.range.begin;
  if (dp.size() == 1 || n == 0) return;
  float* g = grads_.as<float>() + b.range.begin;
  // Open MPI's non-blocking collectives are several times slower than its blocking ones on large
  // buffers, so they are used only when there is backward work to overlap with.
  const Completion when = non_blocking ? Completion::later : Completion::now;
  if (distributed_)
    b.grad_req = dp.reduce_scatter_in_place(g, n / static_cast<std::size_t>(dp.size()), DType::f32, {"reduce-scatter gradients"}, when);
  else
    b.grad_req = dp.all_reduce(g, n, DType::f32, ReduceOp::sum, {"allreduce gradients"}, when);
}

void GradSync::settle(Bucket& b) {
  b.grad_req.wait();
  if (b.settled) return;
  b.settled = true;
  const ArenaRange mine = distributed_ ? b.owned : b.range;
  if (!plan_.shards_grads()) {  // reduced once per step: final
    if (on_final_) on_final_(mine);
    return;
  }
  float* own = grads_.as<float>() + b.owned.begin;
  const long n = static_cast<long>(b.owned.end - b.owned.begin);
  float* sum = accumulated_.data() ? accumulated_.as<float>() + b.packed : nullptr;
  const auto& k = kernels::kernel_table<float>(grads_.device().backend());
  const bool last = b.layer < 0 || b.backward_count == m_;
  if (!last) {
    // An earlier micro-batch: its reduced slice joins the accumulator and the whole bucket goes back,
    // ready (zero) for the next micro-batch's backward.
    if (b.backward_count == 1)
      k.copy(sum, own, n);
    else
      k.residual_forward(sum, sum, own, n);
    grads_.discard(sizeof(float) * b.range.begin, sizeof(float) * b.range.end);
    b.reduced = b.settled = false;
    return;
  }
  if (sum && b.layer >= 0) k.residual_forward(own, own, sum, n);  // the last micro-batch's slice + the earlier ones
  if (on_final_) on_final_(mine);
  grads_.discard(sizeof(float) * b.range.begin, sizeof(float) * b.owned.begin);
  grads_.discard(sizeof(float) * b.owned.end, sizeof(float) * b.range.end);
}

void GradSync::block_backward_begin(int layer) {
  // A reduction of an earlier micro-batch still in flight must finish before the backward adds to the bucket.
  // The bucket is then backed for the gradients the backward adds.
  if (plan_.shards_grads())
    for (auto& b : buckets_)
      if (b.layer == layer) {
        if (b.reduced) settle(b);
        commit(b);
      }
}

void GradSync::block_backward_done(int layer) {
  const bool shards = plan_.shards_grads();
  if (!overlap_ && !shards) return;
  // MPI has no progress thread here: poke the reductions in flight so they advance between blocks.
  if (overlap_)
    for (auto& b : buckets_)
      if (b.reduced && b.grad_req.test()) settle(b);
  for (auto& b : buckets_)
    if (b.layer == layer && (++b.backward_count == m_ || shards)) {
      start_reduce(b, /*non_blocking=*/overlap_);
      if (!overlap_) settle(b);
    }
}

void GradSync::finish() {
  for (auto& b : buckets_) {
    if (!b.reduced) start_reduce(b, /*non_blocking=*/false);
    settle(b);
  }
}

void GradSync::gather_params(bool overlap) {
  // ZeRO-3 gathers a bucket only when a block needs it (ShardedParams).
  if (!distributed_ || plan_.shards_params()) return;
  for (auto& b : buckets_) {
    Communicator& dp = *b.group;
    const std::size_t n = b.range.end - b.range.begin;
    if (n == 0 || dp.size() == 1) continue;
    // The compute weights (fp32 or bf16) of each slice, as its owner's optimizer left them.
    char* first = static_cast<char*>(params_.data()) + b.range.begin * plan_.compute_type_bytes();
    b.param_req = dp.all_gather_in_place(first, n / static_cast<std::size_t>(dp.size()),
                                         storage_dtype(plan_.precision),
                                         {"all-gather updated parameters"}, Completion::later);
  }
  if (!overlap) wait_all_params();
}

void GradSync::wait_params(int layer) {
  for (auto& b : buckets_)
    if (b.layer == layer) b.param_req.wait();
}

void GradSync::wait_all_params() {
  for (auto& b : buckets_) b.param_req.wait();
}

}  // namespace dtrain
