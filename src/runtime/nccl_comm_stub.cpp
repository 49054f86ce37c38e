// NcclComm for builds without CUDA: asking for NCCL there is a clear error, not a link failure.
#include "common/error.hpp"
#include "runtime/nccl_comm.hpp"

namespace dtrain {

NcclComm::NcclComm(MPI_Comm) {
  fatal("this dtrain was built without CUDA/NCCL; rebuild with nvcc on PATH or use system.device=cpu");
}
NcclComm::~NcclComm() = default;

}  // namespace dtrain
