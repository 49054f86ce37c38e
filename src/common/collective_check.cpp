// collective_check: local attempt, MPI agreement on the lowest failing rank, broadcast of its message.
#include "common/collective_check.hpp"

#include "common/error.hpp"

namespace dtrain {

void collective_check(MPI_Comm comm, const std::function<void()>& step) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  std::string message;
  int failed_rank = size;  // "nobody"
  try {
    step();
  } catch (const UserError& e) {
    message = e.what();
    failed_rank = rank;
  }
  int first = size;
  MPI_CHECK(MPI_Allreduce(&failed_rank, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  broadcast_string(comm, message, first);
  throw UserError(size > 1 ? "rank " + std::to_string(first) + ": " + message : message);
}

void broadcast_string(MPI_Comm comm, std::string& text, int root) {
  long len = static_cast<long>(text.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG, root, comm));
  text.resize(static_cast<std::size_t>(len));
  MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(len), MPI_CHAR, root, comm));
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &r));
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 1;
  MPI_CHECK(MPI_Comm_size(comm, &s));
  return s;
}

}  // namespace dtrain
