// NcclComm for CUDA builds: unique id from rank 0 of the MPI communicator, broadcast, init.
#include "runtime/nccl_comm.hpp"

#include "common/error.hpp"
#include "runtime/cuda_check.hpp"

namespace dtrain {

NcclComm::NcclComm(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
  ncclComm_t c = nullptr;
  NCCL_CHECK(ncclCommInitRank(&c, size, id, rank));
  comm_ = c;
}

NcclComm::~NcclComm() {
  if (comm_) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

}  // namespace dtrain
