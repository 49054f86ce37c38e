// host_device(): aligned host memory and memcpy; device_for().
#include "runtime/device.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.hpp"

namespace dtrain {
namespace {

class HostDevice final : public Device {
 public:
  kernels::Backend backend() const override { return kernels::Backend::host; }
  void* allocate(std::size_t bytes) override {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded > 0 ? rounded : 64);
    if (!p) fatal("out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded > 0 ? rounded : 64);
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void* allocate_pinned(std::size_t bytes) override { return allocate(bytes); }
  void release_pinned(void* p) noexcept override { std::free(p); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
  }
  void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  void synchronize() override {}
  std::size_t peak_bytes() const override { return 0; }
};

}  // namespace

Device& host_device() {
  static HostDevice device;
  return device;
}

Device& device_for(kernels::Backend backend) { return backend == kernels::Backend::cuda ? cuda_device() : host_device(); }

}  // namespace dtrain
