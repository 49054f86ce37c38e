// HostComm: a group of ranks for the small agreements on host values (host_values.hpp), the HDF5
// parallel driver and the start-up code: the world, a node, a checkpoint's writers. A non-owning handle
// on an MPI communicator, so that no header outside src/comm names MPI's types; whoever split the
// communicator frees it. The step's tensors use a Communicator instead.
#pragma once
#include <mpi.h>

namespace dtrain {

class HostComm {
 public:
  HostComm() = default;  // no group (MPI_COMM_NULL)
  // Implicit, as a handle of the raw communicator: HostComm world = MPI_COMM_WORLD.
  HostComm(MPI_Comm comm) : comm_(comm) {}  // NOLINT(google-explicit-constructor)

  MPI_Comm mpi() const { return comm_; }
  bool null() const { return comm_ == MPI_COMM_NULL; }
  int rank() const;  // this rank's index in the group
  int size() const;  // ranks in the group

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace dtrain
