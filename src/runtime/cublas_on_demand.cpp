// cuBLAS and cuBLASLt, loaded the first time a GPU run calls them. The kernels call these functions by
// their own names; this file defines each one to find the library's function once (dlopen, dlsym) and
// call it; a missing library ends the job with a message naming it. Linked directly, the two libraries
// cost every process that links dtrain_core (each rank, ckpt-consolidate, dtrain-data) about 90 ms of
// CPU at start for their initialisers and relocations, also on CPU runs that never call them. The
// definitions repeat the headers' declarations, so a signature that differs from cuBLAS's is a compile
// error (one C function cannot have two types). make-bundle reads the libraries' names from the binary
// (their strings below) for the bundle's list of GPU libraries.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "common/error.hpp"

namespace dtrain {
namespace {

#define DTRAIN_STR2(x) #x
#define DTRAIN_STR(x) DTRAIN_STR2(x)

// The libraries of the major version the build compiled against (cuBLASLt shares cuBLAS's).
constexpr const char* kCublasFile = "libcublas.so." DTRAIN_STR(CUBLAS_VER_MAJOR);
constexpr const char* kCublasLtFile = "libcublasLt.so." DTRAIN_STR(CUBLAS_VER_MAJOR);

// A missing library is found by whichever rank calls cuBLAS first (the GPU peak's rank, or each rank's
// first GEMM), not by every rank at once: fatal's tier, which ends the job from that rank.
void* open_library(const char* name) {
  void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    fatal(std::string("cannot load ") + name + " (" + (why ? why : "no reason given") +
          "), which GPU runs need: put CUDA's libraries on LD_LIBRARY_PATH (`module load cuda`), or source a bundle's env.sh, "
          "which finds them; find-gpu-libs " + name + " says where it looked");
  }
  return handle;
}

enum class Library { cublas, cublas_lt };

// LIBRARY's function NAME; the library is opened when the first of its functions is called.
void* symbol(Library library, const char* name) {
  void* handle = nullptr;
  if (library == Library::cublas) {
    static void* const cublas = open_library(kCublasFile);
    handle = cublas;
  } else {
    static void* const cublas_lt = open_library(kCublasLtFile);
    handle = cublas_lt;
  }
  void* f = dlsym(handle, name);
  if (!f) {
    const char* why = dlerror();
    fatal(std::string("internal error: ") + (library == Library::cublas ? kCublasFile : kCublasLtFile) + " has no function " + name + " (" +
          (why ? why : "no reason given") + ")");
  }
  return f;
}

}  // namespace
}  // namespace dtrain

// One definition: NAME(PARAMS) forwards ARGS to LIBRARY's NAME, found once.
#define DTRAIN_ON_DEMAND(library, ret, name, params, args)                                     \
  extern "C" ret CUBLASWINAPI name params {                                                   \
    using Function = ret(*) params;                                                             \
    static const Function real = reinterpret_cast<Function>(::dtrain::symbol(library, #name)); \
    return real args;                                                                           \
  }

constexpr auto kCublas = dtrain::Library::cublas;
constexpr auto kCublasLt = dtrain::Library::cublas_lt;

DTRAIN_ON_DEMAND(kCublas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
DTRAIN_ON_DEMAND(kCublas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
DTRAIN_ON_DEMAND(kCublas, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
DTRAIN_ON_DEMAND(kCublas, const char*, cublasGetStatusString, (cublasStatus_t status), (status))
DTRAIN_ON_DEMAND(kCublas, cublasStatus_t, cublasGemmEx,
                 (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha,
                  const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                  cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                 (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo))
DTRAIN_ON_DEMAND(kCublas, cublasStatus_t, cublasGemmStridedBatchedEx,
                 (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha,
                  const void* A, cudaDataType Atype, int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                  long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
                  cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                 (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC,
                  batchCount, computeType, algo))

DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * lightHandle), (lightHandle))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatrixLayoutCreate,
                 (cublasLtMatrixLayout_t * matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                 (matLayout, type, rows, cols, ld))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmulDescCreate,
                 (cublasLtMatmulDesc_t * matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
                 (matmulDesc, computeType, scaleType))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
                 (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t sizeInBytes),
                 (matmulDesc, attr, buf, sizeInBytes))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                 (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t sizeInBytes),
                 (pref, attr, buf, sizeInBytes))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                 (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
                  cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                  cublasLtMatmulPreference_t preference, int requestedAlgoCount, cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                  int* returnAlgoCount),
                 (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount, heuristicResultsArray,
                  returnAlgoCount))
DTRAIN_ON_DEMAND(kCublasLt, cublasStatus_t, cublasLtMatmul,
                 (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
                  cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                  cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                  size_t workspaceSizeInBytes, cudaStream_t stream),
                 (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes,
                  stream))
