// ExpertLayout's sums and the local (ep = 1) dispatch.
#include "parallel/expert_dispatch.hpp"

#include <numeric>

namespace dtrain {

std::vector<long> ExpertLayout::local_rows() const {
  const std::size_t local = sent.size() / static_cast<std::size_t>(ep);
  std::vector<long> rows(local, 0);
  for (std::size_t i = 0; i < received.size(); ++i) rows[i % local] += received[i];
  return rows;
}

long ExpertLayout::token_rows() const { return std::accumulate(sent.begin(), sent.end(), 0L); }

long ExpertLayout::expert_rows() const { return std::accumulate(received.begin(), received.end(), 0L); }

ExpertLayout LocalExpertDispatch::plan(const std::vector<long>& sent) {
  ExpertLayout l;
  l.sent = sent;
  l.received = sent;
  return l;
}

}  // namespace dtrain
