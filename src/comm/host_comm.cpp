// HostComm's queries: one checked MPI call each.
#include "comm/host_comm.hpp"

#include "common/error.hpp"

namespace dtrain {

int HostComm::rank() const {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &r));
  return r;
}

int HostComm::size() const {
  int s = 1;
  MPI_CHECK(MPI_Comm_size(comm_, &s));
  return s;
}

}  // namespace dtrain
