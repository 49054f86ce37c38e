// AllToAllExpertDispatch: the counts exchange, the two all-to-all-v's and the reorders between
// source-major and local-expert-major rows.
#include "parallel/all_to_all_dispatch.hpp"

#include "common/error.hpp"

namespace dtrain {

ExpertLayout AllToAllExpertDispatch::plan(const std::vector<long>& sent) {
  const std::size_t n = static_cast<std::size_t>(ep_.size());
  if (sent.size() % n != 0) fatal("internal error: " + std::to_string(sent.size()) + " experts over an EP group of " + std::to_string(n));
  ExpertLayout l;
  l.sent = sent;
  l.ep = ep_.size();
  const std::vector<std::size_t> in = ep_.exchange_counts(std::vector<std::size_t>(sent.begin(), sent.end()), {"all-to-all expert counts"});
  l.received.assign(in.begin(), in.end());
  return l;
}

char* AllToAllExpertDispatch::scratch(std::size_t bytes) {
  if (scratch_.bytes() < bytes) scratch_ = Arena(device_, bytes);
  return scratch_.as<char>();
}

void AllToAllExpertDispatch::reorder(const ExpertLayout& layout, const char* from, char* to, std::size_t row_bytes,
                                     bool to_expert_major) {
  const std::size_t n = static_cast<std::size_t>(layout.ep), local = layout.sent.size() / n;
  // Where block (source s, local expert e) starts in each order, in rows.
  std::vector<std::size_t> expert_major(n * local), source_major(n * local);
  std::size_t at = 0;
  for (std::size_t e = 0; e < local; ++e)
    for (std::size_t s = 0; s < n; ++s) expert_major[s * local + e] = at, at += static_cast<std::size_t>(layout.received[s * local + e]);
  at = 0;
  for (std::size_t i = 0; i < n * local; ++i) source_major[i] = at, at += static_cast<std::size_t>(layout.received[i]);
  for (std::size_t i = 0; i < n * local; ++i) {
    const std::size_t rows = static_cast<std::size_t>(layout.received[i]);
    if (rows == 0) continue;
    const std::size_t src = to_expert_major ? source_major[i] : expert_major[i], dst = to_expert_major ? expert_major[i] : source_major[i];
    device_.copy(to + dst * row_bytes, from + src * row_bytes, rows * row_bytes);
  }
}

namespace {

// The all-to-all blocks of the token side: rank s's block is the rows for its experts.
Blocks token_blocks(const ExpertLayout& l, std::size_t row) {
  const std::size_t n = static_cast<std::size_t>(l.ep), local = l.sent.size() / n;
  std::vector<std::size_t> counts(n, 0);
  for (std::size_t e = 0; e < l.sent.size(); ++e) counts[e / local] += static_cast<std::size_t>(l.sent[e]) * row;
  return Blocks::packed(std::move(counts));
}

// The all-to-all blocks of the source-major expert side: source s's block is its rows for every local expert.
Blocks expert_blocks(const ExpertLayout& l, std::size_t row) {
  const std::size_t n = static_cast<std::size_t>(l.ep), local = l.sent.size() / n;
  std::vector<std::size_t> counts(n, 0);
  for (std::size_t i = 0; i < l.received.size(); ++i) counts[i / local] += static_cast<std::size_t>(l.received[i]) * row;
  return Blocks::packed(std::move(counts));
}

}  // namespace

const void* AllToAllExpertDispatch::to_experts(const ExpertLayout& layout, const void* rows, void* buffer, int width, DType type) {
  const std::size_t w = static_cast<std::size_t>(width), row_bytes = w * dtype_bytes(type);
  const Blocks recv = expert_blocks(layout, w);
  char* staged = scratch(recv.total() * dtype_bytes(type));
  ep_.all_to_all_v(rows, token_blocks(layout, w), staged, recv, type, {"all-to-all dispatch tokens"});
  reorder(layout, staged, static_cast<char*>(buffer), row_bytes, /*to_expert_major=*/true);
  return buffer;
}

const void* AllToAllExpertDispatch::from_experts(const ExpertLayout& layout, const void* rows, void* buffer, int width, DType type) {
  const std::size_t w = static_cast<std::size_t>(width), row_bytes = w * dtype_bytes(type);
  const Blocks send = expert_blocks(layout, w);
  char* staged = scratch(send.total() * dtype_bytes(type));
  reorder(layout, static_cast<const char*>(rows), staged, row_bytes, /*to_expert_major=*/false);
  ep_.all_to_all_v(staged, send, buffer, token_blocks(layout, w), type, {"all-to-all combine tokens"});
  return buffer;
}

}  // namespace dtrain
