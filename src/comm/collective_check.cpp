// collective_check: local attempt, agreement on the lowest failing rank, broadcast of its message.
#include "comm/collective_check.hpp"

#include "comm/host_values.hpp"
#include "common/error.hpp"

namespace dtrain {

void collective_check(HostComm comm, const std::function<void()>& step) {
  const int rank = comm.rank(), size = comm.size();
  std::string message;
  int failed_rank = size;  // "nobody"
  try {
    step();
  } catch (const UserError& e) {
    message = e.what();
    failed_rank = rank;
  }
  const int first = all_reduce(comm, failed_rank, HostOp::min);
  if (first == size) return;
  broadcast_string(comm, message, first);
  throw UserError(size > 1 ? "rank " + std::to_string(first) + ": " + message : message);
}

}  // namespace dtrain
