// host_device(): page mappings and memcpy, on-demand memory as pages protected until committed, and
// the bytes a GPU would hold for the same calls (allocations and committed on-demand memory, not the
// pinned buffers); device_for().
#include "runtime/device.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "common/error.hpp"
#include "runtime/on_demand_region.hpp"

namespace dtrain {
namespace {

class HostDevice final : public Device {
 public:
  kernels::Backend backend() const override { return kernels::Backend::host; }
  void* allocate(std::size_t bytes) override { return map(bytes, /*counted=*/true); }
  // On-demand memory: the same mapping with its pages inaccessible (PROT_NONE) until committed; a
  // discarded page goes back to the system and is inaccessible again.
  void* reserve(std::size_t bytes) override {
    char* p = static_cast<char*>(map(bytes, /*counted=*/false));
    protect(p, round_up(bytes > 0 ? bytes : 1, page_size()), PROT_NONE);
    const std::lock_guard<std::mutex> lock(mutex_);
    regions_.emplace(p, OnDemandRegion(bytes, page_size()));
    return p;
  }
  void commit(void* p, std::size_t bytes) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = region_of(p);
    if (!found) return;
    auto& [base, region] = *found;
    for (const auto& run : region.commit(static_cast<char*>(p) - base, bytes)) {
      protect(base + run.first * region.unit(), run.count * region.unit(), PROT_READ | PROT_WRITE);
      add_held(run.count * region.unit());
    }
  }
  void release(void* p) noexcept override {
    if (!p) return;
    const std::size_t* header = reinterpret_cast<const std::size_t*>(static_cast<char*>(p) - page_size());
    const std::size_t total = header[0];
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      held_ -= header[1];
      const auto found = regions_.find(static_cast<char*>(p));
      if (found != regions_.end()) held_ -= found->second.backed_bytes(), regions_.erase(found);
    }
    munmap(const_cast<std::size_t*>(header), total);
  }
  void* allocate_pinned(std::size_t bytes) override { return map(bytes, /*counted=*/false); }
  void release_pinned(void* p) noexcept override { release(p); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    count_host_wait();
    move(dst, src, bytes);
  }
  void upload_queued(void* dst, const void* src, std::size_t bytes) override { move(dst, src, bytes); }
  // Copied now; its wait() counts as the GPU's would.
  CopyInFlight copy_async(void* dst, const void* src, std::size_t bytes) override {
    move(dst, src, bytes);
    struct Done final : CopyInFlight::Impl {
      explicit Done(std::atomic<std::uint64_t>& c) : waits(c) {}
      std::atomic<std::uint64_t>& waits;
      void wait() override { waits.fetch_add(1, std::memory_order_relaxed); }
    };
    return CopyInFlight(std::make_unique<Done>(host_wait_counter()));
  }
  void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  void discard(void* p, std::size_t bytes) override {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (const auto found = region_of(p)) {
        auto& [base, region] = *found;
        const OnDemandRegion::Discard d = region.discard(static_cast<char*>(p) - base, bytes);
        for (const auto& span : d.zero) zero(base + span.offset, span.bytes);
        if (!d.unback.empty()) count_host_wait();  // a GPU waits for its queue before unmapping
        for (const auto& run : d.unback) {
          char* first = base + run.first * region.unit();
          const std::size_t n = run.count * region.unit();
          if (madvise(first, n, MADV_DONTNEED) != 0) fatal(std::string("madvise(MADV_DONTNEED) failed: ") + std::strerror(errno));
          protect(first, n, PROT_NONE);
          held_ -= n;
        }
        return;
      }
    }
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
  void synchronize() override { count_host_wait(); }
  std::size_t held_bytes() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return held_;
  }
  std::size_t peak_bytes() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  void reset_peak() override {
    const std::lock_guard<std::mutex> lock(mutex_);
    peak_ = held_;
  }

 private:
  // One mapping per allocation: a header page holding the mapping's size and the bytes counted as held
  // (0 for pinned and on-demand memory), then the memory, page aligned. Untouched pages cost nothing,
  // so an arena counts in the resident memory once used.
  void* map(std::size_t bytes, bool counted) {
    const std::size_t page = page_size(), total = page + round_up(bytes > 0 ? bytes : 1, page);
    void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
      fatal("out of host memory allocating " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    std::size_t* header = static_cast<std::size_t*>(base);
    header[0] = total;
    header[1] = counted ? bytes : 0;
    if (counted) {
      const std::lock_guard<std::mutex> lock(mutex_);
      add_held(bytes);
    }
    return static_cast<char*>(base) + page;
  }
  void add_held(std::size_t bytes) {  // under mutex_
    held_ += bytes;
    peak_ = held_ > peak_ ? held_ : peak_;
  }
  static void move(void* dst, const void* src, std::size_t bytes) {
    if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
  }
  static std::size_t page_size() {
    static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return size;
  }
  static std::size_t round_up(std::size_t n, std::size_t unit) { return (n + unit - 1) / unit * unit; }
  static void protect(void* p, std::size_t bytes, int access) {
    if (mprotect(p, bytes, access) != 0) fatal(std::string("mprotect failed on on-demand memory: ") + std::strerror(errno));
  }
  // The on-demand region holding p (and its base), or null. Under mutex_.
  std::pair<char* const, OnDemandRegion>* region_of(void* p) {
    auto it = regions_.upper_bound(static_cast<char*>(p));
    if (it == regions_.begin()) return nullptr;
    --it;
    return static_cast<char*>(p) < it->first + it->second.bytes() ? &*it : nullptr;
  }
  mutable std::mutex mutex_;
  std::map<char*, OnDemandRegion> regions_;  // by base
  std::size_t held_ = 0, peak_ = 0;          // what a GPU would hold, under mutex_
};

}  // namespace

Device& host_device() {
  static HostDevice device;
  return device;
}

Device& device_for(kernels::Backend backend) { return backend == kernels::Backend::cuda ? cuda_device() : host_device(); }

}  // namespace dtrain
