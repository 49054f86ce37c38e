// select_cuda_device for CUDA builds: count devices, pick local_rank % count, check a cuBLAS handle works.
#include "runtime/cuda_device.hpp"

#include <string>

#include "runtime/cuda_check.hpp"

namespace dtrain {

int select_cuda_device(const LaunchEnv& env, bool allow_shared_gpu) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0)
    fatal(std::string("system.device=cuda but no usable GPU on node ") + env.node_name + " (" +
          (rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices") + "); use system.device=cpu or run on a GPU node");
  if (env.local_size > count && !allow_shared_gpu)
    fatal(std::to_string(env.local_size) + " ranks on node " + env.node_name + " but only " + std::to_string(count) +
          " GPUs; start at most one rank per GPU (srun --ntasks-per-node=" + std::to_string(count) + ")");
  const int device = device_for_local_rank(env.local_rank, count);
  CUDA_CHECK(cudaSetDevice(device));
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasDestroy(handle));
  return device;
}

}  // namespace dtrain
