// CUDA backend: the device buffer of the column sums' partial sums (column_sums, device_math.cuh).
#include "kernels/cuda/device_math.cuh"

namespace dtrain::kernels::cuda {
namespace {

__device__ float g_column_partials[kColumnPartials];  // (K, splits, C)

}  // namespace

float* column_partials() {
  static float* p = [] {
    void* address = nullptr;
    CUDA_CHECK(cudaGetSymbolAddress(&address, g_column_partials));
    return static_cast<float*>(address);
  }();
  return p;
}

}  // namespace dtrain::kernels::cuda
