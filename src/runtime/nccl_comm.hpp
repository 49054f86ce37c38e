// NcclComm: an NCCL communicator bootstrapped over an MPI communicator (rank 0 of that communicator
// makes the unique id and MPI_Bcasts it; no MASTER_ADDR, no TCP store). Move-only RAII.
// In builds without CUDA the constructor reports that the GPU backend is missing.
#pragma once
#include <mpi.h>

namespace dtrain {

class NcclComm {
 public:
  explicit NcclComm(MPI_Comm comm);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  void* raw() const { return comm_; }  // ncclComm_t

 private:
  void* comm_ = nullptr;
};

}  // namespace dtrain
