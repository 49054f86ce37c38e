// Checked calls for CUDA, cuBLAS and NCCL: on failure, fatal() with call, file:line and the library's
// own error string. Only included by translation units of CUDA builds.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "common/error.hpp"

namespace dtrain {

inline void check_cuda(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc != cudaSuccess)
    fatal(std::string("CUDA call failed at ") + file + ":" + std::to_string(line) + ": " + call + ": " +
          cudaGetErrorString(rc));
}
inline void check_cublas(cublasStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    fatal(std::string("cuBLAS call failed at ") + file + ":" + std::to_string(line) + ": " + call + ": " +
          cublasGetStatusString(rc));
}
inline void check_nccl(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc != ncclSuccess)
    fatal(std::string("NCCL call failed at ") + file + ":" + std::to_string(line) + ": " + call + ": " +
          ncclGetErrorString(rc));
}

}  // namespace dtrain

#define CUDA_CHECK(call) ::dtrain::check_cuda((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) ::dtrain::check_cublas((call), #call, __FILE__, __LINE__)
#define NCCL_CHECK(call) ::dtrain::check_nccl((call), #call, __FILE__, __LINE__)
