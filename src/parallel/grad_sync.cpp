// GradSync: bucket layout, non-blocking reductions, ZeRO-1 slices and the parameter gather.
#include "parallel/grad_sync.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace dtrain {

std::vector<BucketSpan> gradient_buckets(const TensorTable& table, std::size_t size) {
  std::vector<BucketSpan> spans;
  for (const auto& t : table.tensors()) {
    if (t.layer < 0) continue;
    if (spans.empty() || spans.back().layer != t.layer) spans.push_back({{t.offset, t.offset}, t.layer});
    spans.back().range.end = t.offset + t.numel;
  }
  const std::size_t first = spans.empty() ? size : spans.front().range.begin;
  const std::size_t last = spans.empty() ? size : spans.back().range.end;
  std::vector<BucketSpan> buckets{{{0, first}, -1}};
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const std::size_t end = i + 1 < spans.size() ? spans[i + 1].range.begin : last;  // alignment gaps go with the block
    buckets.push_back({{spans[i].range.begin, end}, spans[i].layer});
  }
  buckets.push_back({{last, size}, -1});
  return buckets;
}

std::vector<int> slice_counts(std::size_t n, int dp) {
  std::vector<int> counts;
  for (int i = 0; i < dp; ++i) counts.push_back(static_cast<int>(n / dp + (static_cast<std::size_t>(i) < n % dp ? 1 : 0)));
  return counts;
}

std::vector<ArenaRange> optimizer_ranges(const std::vector<BucketSpan>& buckets, std::size_t size, int dp, int r,
                                         bool distributed) {
  if (!distributed) return {{0, size}};
  std::vector<ArenaRange> owned;
  for (const auto& b : buckets) {
    const auto counts = slice_counts(b.range.end - b.range.begin, dp);
    std::size_t lo = b.range.begin;
    for (int i = 0; i < r; ++i) lo += static_cast<std::size_t>(counts[i]);
    if (counts[r] > 0) owned.push_back({lo, lo + static_cast<std::size_t>(counts[r])});
  }
  return owned;
}

bool counts_tensor(const TensorSpec& t, int tp_rank, bool last_stage_with_tied_copy) {
  if (t.split_dim < 0 && tp_rank != 0) return false;                // replicated over TP
  if (t.name == "wte" && last_stage_with_tied_copy) return false;  // the first stage counts it
  return true;
}

GradSync::GradSync(GptModel& model, const ParallelState& ps, bool overlap, bool distributed, int m)
    : model_(model), ps_(ps), overlap_(overlap), distributed_(distributed), m_(m) {
  const std::size_t size = model.grads().size();
  const int dp = ps.dp().size();
  for (const auto& span : gradient_buckets(model.table(), size)) {
    Bucket b{span.range, span.layer, slice_counts(span.range.end - span.range.begin, dp), {}};
    for (int i = 0, displ = 0; i < dp; ++i) {
      b.displs.push_back(displ);
      displ += b.counts[i];
    }
    buckets_.push_back(std::move(b));
  }
  owned_ = optimizer_ranges(gradient_buckets(model.table(), size), size, dp, ps.dp().rank(), distributed_);
  if (ps.tp().size() > 1) sp_tensors_ = model.sequence_parallel_tensors();
  if (ps.embedding().size() > 1) tied_wte_ = model.table().find("wte");
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
  float* g = model_.grads().data();
  auto in_bucket = [&](const TensorSpec* t) { return t && t->offset >= b.range.begin && t->offset < b.range.end; };
  auto w = watch(ps_.watchdog(), {"allreduce (sequence-parallel / tied-embedding gradients)", "tp/embedding", -1, 0});
  for (const TensorSpec* t : sp_tensors_)
    if (in_bucket(t))
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g + t->offset, static_cast<int>(t->numel), MPI_FLOAT, MPI_SUM, ps_.tp().comm()));
  // The tied embedding lives on the first and the last stage; both copies get the summed gradient.
  const TensorSpec* wte = tied_wte_;
  if (in_bucket(wte))
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g + wte->offset, static_cast<int>(wte->numel), MPI_FLOAT, MPI_SUM,
                            ps_.embedding().comm()));
}

void GradSync::start_reduce(Bucket& b, bool non_blocking) {
  prepare(b);
  if (ps_.dp().size() == 1 || b.range.end == b.range.begin) return;
  float* g = model_.grads().data() + b.range.begin;
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
    float* g = model_.grads().data();
    for (auto& b : buckets_)
      if (b.displs[r] > 0 && b.counts[r] > 0)
        std::memmove(g + b.range.begin + b.displs[r], g + b.range.begin, sizeof(float) * static_cast<std::size_t>(b.counts[r]));
  }
}

bool GradSync::counts_for_norm(const TensorSpec& t) const {
  return counts_tensor(t, ps_.tp().rank(), ps_.embedding().size() > 1 && ps_.is_last_stage());
}

void GradSync::gather_params(bool overlap) {
  if (!distributed_ || ps_.dp().size() == 1) return;
  for (auto& b : buckets_) {
    if (b.range.end == b.range.begin) continue;
    float* p = model_.params().data() + b.range.begin;
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
