// GPU memory through CUDA's virtual-memory API, for on-demand arenas: an address range reserved once,
// chunks of physical memory (the allocation granularity, 2 MiB on current GPUs) mapped into it and
// unmapped again. Unmapped chunks go to a pool that the next map takes from, so the GPU memory this
// process holds is what was ever mapped at once, and the addresses of an arena never move. The driver
// functions are looked up through the runtime (cudaGetDriverEntryPointByVersion) when first needed, so
// the program does not link libcuda and runs without a driver on CPU-only machines. CUDA builds only.
#pragma once
#include <cstddef>
#include <vector>

namespace dtrain {

class CudaVmm {
 public:
  CudaVmm() = default;
  CudaVmm(const CudaVmm&) = delete;
  CudaVmm& operator=(const CudaVmm&) = delete;
  ~CudaVmm();
  std::size_t granularity();                  // bytes per chunk on the current device
  char* reserve(std::size_t bytes);           // bytes: a multiple of granularity(); nothing mapped
  void free(char* p, std::size_t bytes);      // a reserved range, unmapped
  void map(char* p, std::size_t bytes);       // chunks [p, p + bytes), readable and writable by the device
  void unmap(char* p, std::size_t bytes);     // the device's work on them must be done
  std::size_t pooled_bytes() const;           // unmapped physical chunks kept for reuse

 private:
  void load();  // the driver functions and the allocation properties, once
  struct Mapped {
    char* p;
    unsigned long long handle;
  };
  bool loaded_ = false;
  int device_ = 0;
  std::size_t granularity_ = 0;
  std::vector<unsigned long long> pool_;  // physical chunks not mapped anywhere
  std::vector<Mapped> mapped_;            // sorted by address
};

}  // namespace dtrain
