// make_nccl_communicator for builds without CUDA: NCCL is refused with the fix.
#include "comm/nccl_communicator.hpp"

#include "common/error.hpp"

namespace dtrain {

std::unique_ptr<Communicator> make_nccl_communicator(const std::string&, HostComm, int, int, std::vector<int>, bool, Watchdog*,
                                                     Trace*) {
  fatal("system.comm_backend=nccl but this dtrain was built without CUDA; rebuild with nvcc on PATH or use system.comm_backend=mpi");
}

}  // namespace dtrain
