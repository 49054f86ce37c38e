// CudaVmm: cuMemAddressReserve / cuMemCreate / cuMemMap / cuMemSetAccess / cuMemUnmap, the driver
// functions found through the runtime, every call checked with the driver's error string.
#include "runtime/cuda_vmm.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/cuda_check.hpp"
#include "common/error.hpp"

namespace dtrain {
namespace {

struct Driver {
  PFN_cuGetErrorString_v6000 error_string = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
};

Driver& driver() {
  static Driver d;
  return d;
}

template <typename F>
void find(F& f, const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !fn)
    fatal(std::string("the CUDA driver has no ") + name + " (the virtual-memory API ZeRO-2/3 use on GPUs); update the driver");
  f = reinterpret_cast<F>(fn);
}

void check(CUresult rc, const char* call, const char* file, int line) {
  if (rc == CUDA_SUCCESS) return;
  const char* what = "unknown error";
  if (driver().error_string) driver().error_string(rc, &what);
  fatal(std::string("CUDA driver call failed at ") + file + ":" + std::to_string(line) + ": " + call + ": " + what);
}
#define CU_CHECK(call) check((call), #call, __FILE__, __LINE__)

CUmemAllocationProp properties(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

CUdeviceptr address(const char* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

void CudaVmm::load() {
  if (loaded_) return;
  Driver& d = driver();
  find(d.error_string, "cuGetErrorString");
  find(d.reserve, "cuMemAddressReserve");
  find(d.address_free, "cuMemAddressFree");
  find(d.create, "cuMemCreate");
  find(d.release, "cuMemRelease");
  find(d.map, "cuMemMap");
  find(d.unmap, "cuMemUnmap");
  find(d.set_access, "cuMemSetAccess");
  find(d.granularity, "cuMemGetAllocationGranularity");
  CUDA_CHECK(cudaGetDevice(&device_));
  const CUmemAllocationProp prop = properties(device_);
  CU_CHECK(d.granularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  loaded_ = true;
}

std::size_t CudaVmm::granularity() {
  load();
  return granularity_;
}

char* CudaVmm::reserve(std::size_t bytes) {
  load();
  CUdeviceptr p = 0;
  CU_CHECK(driver().reserve(&p, bytes, granularity_, 0, 0));
  return reinterpret_cast<char*>(p);
}

void CudaVmm::free(char* p, std::size_t bytes) {
  unmap(p, bytes);
  CU_CHECK(driver().address_free(address(p), bytes));
}

void CudaVmm::map(char* p, std::size_t bytes) {
  load();
  const CUmemAllocationProp prop = properties(device_);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (char* chunk = p; chunk < p + bytes; chunk += granularity_) {
    unsigned long long handle = 0;
    if (!pool_.empty()) {
      handle = pool_.back();
      pool_.pop_back();
    } else {
      CUmemGenericAllocationHandle h{};
      const CUresult rc = driver().create(&h, granularity_, &prop, 0);
      if (rc == CUDA_ERROR_OUT_OF_MEMORY)
        fatal("out of GPU memory mapping " + std::to_string(bytes >> 20) + " MiB of a ZeRO-2/3 arena; use more data-parallel "
              "ranks, system.offload_optimizer / offload_params, a smaller micro_batch_size, or recomputation");
      CU_CHECK(rc);
      handle = h;
    }
    CU_CHECK(driver().map(address(chunk), granularity_, 0, handle, 0));
    CU_CHECK(driver().set_access(address(chunk), granularity_, &access, 1));
    mapped_.insert(std::upper_bound(mapped_.begin(), mapped_.end(), chunk, [](const char* a, const Mapped& m) { return a < m.p; }),
                   Mapped{chunk, handle});
  }
}

void CudaVmm::unmap(char* p, std::size_t bytes) {
  auto it = std::lower_bound(mapped_.begin(), mapped_.end(), p, [](const Mapped& m, const char* a) { return m.p < a; });
  auto end = it;
  while (end != mapped_.end() && end->p < p + bytes) ++end;
  for (auto m = it; m != end; ++m) {
    CU_CHECK(driver().unmap(address(m->p), granularity_));
    pool_.push_back(m->handle);
  }
  mapped_.erase(it, end);
}

std::size_t CudaVmm::pooled_bytes() const { return pool_.size() * granularity_; }

CudaVmm::~CudaVmm() {
  // At exit: the chunks go back to the driver (errors ignored: the context may be gone).
  if (!loaded_) return;
  for (const Mapped& m : mapped_) driver().unmap(address(m.p), granularity_), driver().release(m.handle);
  for (unsigned long long h : pool_) driver().release(h);
}

}  // namespace dtrain
