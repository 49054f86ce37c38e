// host_device(): page mappings and memcpy; device_for().
#include "runtime/device.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.hpp"

namespace dtrain {
namespace {

class HostDevice final : public Device {
 public:
  kernels::Backend backend() const override { return kernels::Backend::host; }
  // One mapping per allocation: a header page holding the mapping's size, then the memory, page
  // aligned. Untouched pages cost nothing, so an arena counts in the resident memory once used.
  void* allocate(std::size_t bytes) override {
    const std::size_t page = page_size(), total = page + round_up(bytes > 0 ? bytes : 1, page);
    void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
      fatal("out of host memory allocating " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    *static_cast<std::size_t*>(base) = total;
    return static_cast<char*>(base) + page;
  }
  void release(void* p) noexcept override {
    if (!p) return;
    char* base = static_cast<char*>(p) - page_size();
    munmap(base, *reinterpret_cast<std::size_t*>(base));
  }
  void* allocate_pinned(std::size_t bytes) override { return allocate(bytes); }
  void release_pinned(void* p) noexcept override { release(p); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
  }
  void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  void discard(void* p, std::size_t bytes) override {
    const std::size_t page = page_size();
    const auto begin = reinterpret_cast<std::uintptr_t>(p), end = begin + bytes;
    const std::uintptr_t first = round_up(begin, page), last = end / page * page;
    if (first >= last) {
      zero(p, bytes);
      return;
    }
    zero(p, first - begin);
    zero(reinterpret_cast<void*>(last), end - last);
    if (madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0)
      fatal(std::string("madvise(MADV_DONTNEED) failed: ") + std::strerror(errno));
  }
  void synchronize() override {}
  std::size_t peak_bytes() const override { return 0; }

 private:
  static std::size_t page_size() {
    static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return size;
  }
  static std::size_t round_up(std::size_t n, std::size_t unit) { return (n + unit - 1) / unit * unit; }
};

}  // namespace

Device& host_device() {
  static HostDevice device;
  return device;
}

Device& device_for(kernels::Backend backend) { return backend == kernels::Backend::cuda ? cuda_device() : host_device(); }

}  // namespace dtrain
