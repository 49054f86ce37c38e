// GradSync: bucket layout, non-blocking reductions, ZeRO-1 slices and the parameter gather.
#include "parallel/grad_sync.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace dtrain {

GradSync::GradSync(const RankPlan& plan, Arena& params, Arena& grads, const ParallelState& ps, bool overlap, int m)
    : plan_(plan), params_(params), grads_(grads), ps_(ps), overlap_(overlap), distributed_(plan.distributed_optimizer), m_(m) {
  const int dp = ps.dp().size();
  for (const auto& span : plan.buckets) {
    Bucket b{span.range, span.layer, slice_counts(span.range.end - span.range.begin, dp), {}};
    for (int i = 0, displ = 0; i < dp; ++i) {
      b.displs.push_back(displ);
      displ += b.counts[i];
    }
    buckets_.push_back(std::move(b));
  }
  backward_counts_.assign(buckets_.size(), 0);
}

GradSync::~GradSync() {
  for (auto& b : buckets_) {
    if (b.grad_req != MPI_REQUEST_NULL) MPI_Wait(&b.grad_req, MPI_STATUS_IGNORE);
    if (b.param_req != MPI_REQUEST_NULL) MPI_Wait(&b.param_req, MPI_STATUS_IGNORE);
  }
}

void GradSync::start_step() { std::fill(backward_counts_.begin(), backward_counts_.end(), 0); }

void GradSync::prepare(Bucket& b) {
  float* g = grads_.data();
  const auto& tensors = plan_.table.tensors();
  auto in_bucket = [&](const TensorSpec* t) { return t && t->offset >= b.range.begin && t->offset < b.range.end; };
  auto w = watch(ps_.watchdog(), {"allreduce (sequence-parallel / tied-embedding gradients)", "tp/embedding", -1, 0});
  for (int i : plan_.sequence_parallel_tensors) {
    const TensorSpec* t = &tensors[static_cast<std::size_t>(i)];
    if (in_bucket(t))
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g + t->offset, static_cast<int>(t->numel), MPI_FLOAT, MPI_SUM, ps_.tp().comm()));
  }
  // The tied embedding lives on the first and the last stage; both copies get the summed gradient.
  const TensorSpec* wte = plan_.tied_embedding >= 0 ? &tensors[static_cast<std::size_t>(plan_.tied_embedding)] : nullptr;
  if (in_bucket(wte))
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g + wte->offset, static_cast<int>(wte->numel), MPI_FLOAT, MPI_SUM,
                            ps_.embedding().comm()));
}

void GradSync::start_reduce(Bucket& b, bool non_blocking) {
  prepare(b);
  if (ps_.dp().size() == 1 || b.range.end == b.range.begin) return;
  float* g = grads_.data() + b.range.begin;
  const int n = static_cast<int>(b.range.end - b.range.begin);
  const MPI_Comm dp = ps_.dp().comm();
  auto w = watch(non_blocking ? nullptr : ps_.watchdog(), {distributed_ ? "reduce-scatter gradients" : "allreduce gradients", "dp", -1, n * 4L});
  // Open MPI's non-blocking collectives are several times slower than its blocking ones on large
  // buffers, so they are used only when there is backward work to overlap with.
  if (distributed_ && non_blocking)
    MPI_CHECK(MPI_Ireduce_scatter(MPI_IN_PLACE, g, b.counts.data(), MPI_FLOAT, MPI_SUM, dp, &b.grad_req));
  else if (distributed_)
    MPI_CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, g, b.counts.data(), MPI_FLOAT, MPI_SUM, dp));
  else if (non_blocking)
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, g, n, MPI_FLOAT, MPI_SUM, dp, &b.grad_req));
  else
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g, n, MPI_FLOAT, MPI_SUM, dp));
}

void GradSync::block_backward_done(int layer) {
  if (!overlap_) return;
  // MPI has no progress thread here: poke the reductions in flight so they advance between blocks.
  for (auto& b : buckets_)
    if (b.grad_req != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_CHECK(MPI_Test(&b.grad_req, &done, MPI_STATUS_IGNORE));
    }
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (buckets_[i].layer == layer && ++backward_counts_[i] == m_) start_reduce(buckets_[i], /*non_blocking=*/true);
}

void GradSync::finish() {
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    const bool started = overlap_ && b.layer >= 0;
    if (!started) start_reduce(b, /*non_blocking=*/false);
    if (b.grad_req != MPI_REQUEST_NULL) {
      auto w = watch(ps_.watchdog(), {"wait for gradient reduction", "dp", -1, static_cast<long>(b.range.end - b.range.begin) * 4L});
      MPI_CHECK(MPI_Wait(&b.grad_req, MPI_STATUS_IGNORE));
    }
  }
  if (distributed_ && ps_.dp().size() > 1) {
    // MPI_Ireduce_scatter with MPI_IN_PLACE leaves the result at the start of the buffer; move each
    // slice to its own offset so that arena offsets keep meaning the same tensor element.
    const int r = ps_.dp().rank();
    float* g = grads_.data();
    for (auto& b : buckets_)
      if (b.displs[r] > 0 && b.counts[r] > 0)
        std::memmove(g + b.range.begin + b.displs[r], g + b.range.begin, sizeof(float) * static_cast<std::size_t>(b.counts[r]));
  }
}

void GradSync::gather_params(bool overlap) {
  if (!distributed_ || ps_.dp().size() == 1) return;
  for (auto& b : buckets_) {
    if (b.range.end == b.range.begin) continue;
    float* p = params_.data() + b.range.begin;
    MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, p, b.counts.data(), b.displs.data(), MPI_FLOAT, ps_.dp().comm(),
                              &b.param_req));
  }
  if (!overlap) wait_all_params();
}

void GradSync::wait_params(int layer) {
  for (auto& b : buckets_)
    if (b.layer == layer && b.param_req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&b.param_req, MPI_STATUS_IGNORE));
}

void GradSync::wait_all_params() {
  for (auto& b : buckets_)
    if (b.param_req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&b.param_req, MPI_STATUS_IGNORE));
}

}  // namespace dtrain
