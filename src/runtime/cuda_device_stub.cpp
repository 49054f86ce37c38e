// select_cuda_device for builds without CUDA: device=cuda is rejected with the fix.
#include "common/error.hpp"
#include "runtime/cuda_device.hpp"

namespace dtrain {

int select_cuda_device(const LaunchEnv&, bool) {
  fatal("system.device=cuda but this dtrain was built without CUDA; rebuild with nvcc on PATH or use system.device=cpu");
}

}  // namespace dtrain
