// GradSync: bucketed reductions (blocking, or started as soon as a bucket is ready), the distributed
// optimizer's reduce-scatter and parameter all-gather, through the communication layer.
#include "parallel/grad_sync.hpp"

#include <algorithm>

namespace dtrain {

GradSync::GradSync(const RankPlan& plan, Arena& params, Arena& grads, const ParallelState& ps, bool overlap, int m)
    : plan_(plan), params_(params), grads_(grads), ps_(ps), overlap_(overlap), distributed_(plan.distributed_optimizer), m_(m) {
  for (const auto& span : plan.buckets) buckets_.push_back({span.range, span.layer, owned_slice(span, ps.dp().size(), ps.dp().rank()), {}, {}});
  backward_counts_.assign(buckets_.size(), 0);
}

void GradSync::start_step() {
  std::fill(backward_counts_.begin(), backward_counts_.end(), 0);
  for (auto& b : buckets_) b.reduced = b.settled = false;
  if (!plan_.shards_grads()) {
    grads_.zero();
    return;
  }
  for (const auto& b : buckets_)
    grads_.device().zero(grads_.as<float>() + b.owned.begin, sizeof(float) * (b.owned.end - b.owned.begin));
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
  Communicator& dp = ps_.dp();
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
  if (!plan_.shards_grads()) return;
  grads_.discard(sizeof(float) * b.range.begin, sizeof(float) * b.owned.begin);
  grads_.discard(sizeof(float) * b.owned.end, sizeof(float) * b.range.end);
}

void GradSync::block_backward_done(int layer) {
  if (!overlap_ && !plan_.shards_grads()) return;
  // MPI has no progress thread here: poke the reductions in flight so they advance between blocks.
  if (overlap_)
    for (auto& b : buckets_)
      if (b.reduced && b.grad_req.test()) settle(b);
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (buckets_[i].layer == layer && ++backward_counts_[i] == m_) {
      start_reduce(buckets_[i], /*non_blocking=*/overlap_);
      if (!overlap_) settle(buckets_[i]);
    }
}

void GradSync::finish() {
  for (auto& b : buckets_) {
    if (!b.reduced) start_reduce(b, /*non_blocking=*/false);
    settle(b);
  }
}

void GradSync::gather_params(bool overlap) {
  Communicator& dp = ps_.dp();
  // ZeRO-3 gathers a bucket only when a block needs it (ShardedParams).
  if (!distributed_ || dp.size() == 1 || plan_.shards_params()) return;
  for (auto& b : buckets_) {
    const std::size_t n = b.range.end - b.range.begin;
    if (n == 0) continue;
    // The compute weights (fp32 or bf16) of each slice, as its owner's optimizer left them.
    char* first = static_cast<char*>(params_.data()) + b.range.begin * plan_.compute_type_bytes();
    b.param_req = dp.all_gather_in_place(first, n / static_cast<std::size_t>(dp.size()),
                                         plan_.precision == Precision::bf16 ? DType::bf16 : DType::f32,
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
