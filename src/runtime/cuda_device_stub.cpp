// The GPU functions of runtime/cuda_device.hpp for builds without CUDA: device=cuda is rejected with the fix.
#include "common/error.hpp"
#include "runtime/cuda_device.hpp"
#include "runtime/device.hpp"

namespace dtrain {

namespace {
[[noreturn]] void no_cuda() {
  fatal("system.device=cuda but this dtrain was built without CUDA; rebuild with nvcc on PATH or use system.device=cpu");
}
}  // namespace

CudaSelection select_cuda_device(int, int, const std::string&, bool) { no_cuda(); }
Device& cuda_device() { no_cuda(); }
std::size_t gpu_memory_bytes() { no_cuda(); }
int gpu_compute_capability() { no_cuda(); }
double gpu_gemm_peak_gflops(Precision, double) { no_cuda(); }

}  // namespace dtrain
