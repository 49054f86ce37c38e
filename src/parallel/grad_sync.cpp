// GradSync: bucket layout, non-blocking reductions, ZeRO-1 slices and the parameter gather.
#include "parallel/grad_sync.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace dtrain {

GradSync::GradSync(GptModel& model, const ParallelState& ps, bool overlap, bool distributed, int m)
    : model_(model), ps_(ps), overlap_(overlap), distributed_(distributed), m_(m) {
  const TensorTable& table = model.table();
  const std::size_t size = model.grads().size();
  // Buckets: [0, first block) embedding, one per block, [end of last block, arena end) head.
  std::vector<std::pair<int, ArenaRange>> spans;
  for (const auto& t : table.tensors()) {
    if (t.layer < 0) continue;
    if (spans.empty() || spans.back().first != t.layer) spans.push_back({t.layer, {t.offset, t.offset}});
    spans.back().second.end = t.offset + t.numel;
  }
  const std::size_t first = spans.empty() ? size : spans.front().second.begin;
  const std::size_t last = spans.empty() ? size : spans.back().second.end;
  buckets_.push_back({{0, first}, -1, {}, {}});
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const std::size_t end = i + 1 < spans.size() ? spans[i + 1].second.begin : last;  // alignment gaps go with the block
    buckets_.push_back({{spans[i].second.begin, end}, spans[i].first, {}, {}});
  }
  buckets_.push_back({{last, size}, -1, {}, {}});

  const int dp = ps.dp().size(), r = ps.dp().rank();
  for (auto& b : buckets_) {
    const std::size_t n = b.range.end - b.range.begin;
    for (int i = 0, displ = 0; i < dp; ++i) {
      const int c = static_cast<int>(n / dp + (static_cast<std::size_t>(i) < n % dp ? 1 : 0));
      b.counts.push_back(c);
      b.displs.push_back(displ);
      displ += c;
    }
    if (distributed_) {
      const std::size_t lo = b.range.begin + b.displs[r];
      if (b.counts[r] > 0) owned_.push_back({lo, lo + static_cast<std::size_t>(b.counts[r])});
    }
  }
  if (!distributed_) owned_.push_back({0, size});
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
  for (const TensorSpec* t : model_.sequence_parallel_tensors())
    if (t->offset >= b.range.begin && t->offset < b.range.end && ps_.tp().size() > 1)
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g + t->offset, static_cast<int>(t->numel), MPI_FLOAT, MPI_SUM, ps_.tp().comm()));
  // The tied embedding lives on the first and the last stage; both copies get the summed gradient.
  const TensorSpec* wte = model_.table().find("wte");
  if (wte && ps_.embedding().size() > 1 && wte->offset >= b.range.begin && wte->offset < b.range.end)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g + wte->offset, static_cast<int>(wte->numel), MPI_FLOAT, MPI_SUM,
                            ps_.embedding().comm()));
}

void GradSync::start_reduce(Bucket& b, bool non_blocking) {
  prepare(b);
  if (ps_.dp().size() == 1 || b.range.end == b.range.begin) return;
  float* g = model_.grads().data() + b.range.begin;
  const int n = static_cast<int>(b.range.end - b.range.begin);
  const MPI_Comm dp = ps_.dp().comm();
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
    if (b.grad_req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&b.grad_req, MPI_STATUS_IGNORE));
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
  if (t.split_dim < 0 && ps_.tp().rank() != 0) return false;                 // replicated over TP
  if (t.name == "wte" && ps_.embedding().size() > 1 && ps_.is_last_stage()) return false;  // tied copy
  return true;
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
