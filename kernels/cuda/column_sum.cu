// CUDA backend: the device buffer of column_sum's partial sums (device_math.cuh) and its second pass,
// the per-column total over the row splits in a fixed order.
#include "kernels/cuda/device_math.cuh"

namespace dtrain::kernels::cuda {
namespace {

__device__ float g_column_partials[kColumnPartials];  // (splits, C)

}  // namespace

float* column_partials() {
  static float* p = [] {
    void* address = nullptr;
    CUDA_CHECK(cudaGetSymbolAddress(&address, g_column_partials));
    return static_cast<float*>(address);
  }();
  return p;
}

__global__ void column_total_kernel(float* out, const float* partials /*(splits,C)*/, int splits, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f;
  for (int y = 0; y < splits; ++y) s += partials[static_cast<long>(y) * C + c];
  out[c] += s;
}

}  // namespace dtrain::kernels::cuda
