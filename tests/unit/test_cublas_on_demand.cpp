// cuBLAS and cuBLASLt are opened on demand (src/runtime/cublas_on_demand.cpp): a process that links
// dtrain_core does not load them at start, and the first call of one of their functions opens its
// library and reaches the library's own function (neither call needs a GPU). CUDA builds only.
#include <catch2/catch.hpp>

#include "dtrain_config.hpp"

#if DTRAIN_HAS_CUDA
#include <cublasLt.h>
#include <cublas_v2.h>
#include <link.h>

#include <cstring>
#include <string>

namespace {

struct Search {
  const char* library;
  bool found = false;
};

bool loaded(const char* library) {
  Search search{library};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name && std::strstr(info->dlpi_name, s->library)) s->found = true;
        return 0;
      },
      &search);
  return search.found;
}

}  // namespace

TEST_CASE("cuBLAS and cuBLASLt are opened when first called", "[cublas]") {
  CHECK_FALSE(loaded("/libcublas.so"));
  CHECK_FALSE(loaded("/libcublasLt.so"));
  // cuBLAS's own text for the status (the library answers, not a stand-in)
  CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)) == "the library was not initialized");
  CHECK(loaded("/libcublas.so"));
  cublasLtMatrixLayout_t layout = nullptr;
  REQUIRE(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 3, 4) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatrixLayoutDestroy(layout) == CUBLAS_STATUS_SUCCESS);
  CHECK(loaded("/libcublasLt.so"));
}
#endif
