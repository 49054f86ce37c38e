// The memory of the device a rank computes on, and copies between it and the host. Host: anonymous
// page mappings (zero pages until touched, so memory counts only once used) and memcpy. CUDA: cudaMalloc'd device memory (arenas, allocated once at start), pinned
// host memory for staging, cudaMemcpy in any direction. Kernels run on the device's memory; whatever
// the host reads or writes (checkpoints, token batches, the final weights) is copied through host
// buffers, pinned on a GPU.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/backend.hpp"

namespace dtrain {

// An asynchronous copy (Device::copy_async) in flight: wait() returns once it is done. An empty one is
// done. Destroying one waits for it.
class CopyInFlight {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void wait() = 0;
  };
  CopyInFlight() = default;
  explicit CopyInFlight(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  CopyInFlight(CopyInFlight&&) = default;
  CopyInFlight& operator=(CopyInFlight&& o) noexcept {
    wait();
    impl_ = std::move(o.impl_);
    return *this;
  }
  ~CopyInFlight() { wait(); }
  void wait() {
    if (impl_) impl_->wait(), impl_.reset();
  }

 private:
  std::unique_ptr<Impl> impl_;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual kernels::Backend backend() const = 0;
  bool is_host() const { return backend() == kernels::Backend::host; }
  virtual void* allocate(std::size_t bytes) = 0;  // zero-filled; never null (fatal when out of memory)
  // On-demand memory (ZeRO-2/3's parameter and gradient arenas): `bytes` of address space with no
  // memory behind it; commit() backs a range (zero-filled where newly backed) before it is used, and
  // discard() takes the memory of the whole units inside a range back (host: pages, which then fault
  // until committed again, so a use without a commit shows in every test; CUDA: chunks of the
  // virtual-memory API, which the GPU cannot touch unmapped). Released with release().
  virtual void* reserve(std::size_t bytes) = 0;
  virtual void commit(void* p, std::size_t bytes) = 0;  // a no-op outside on-demand memory
  virtual void release(void* p) noexcept = 0;
  virtual void* allocate_pinned(std::size_t bytes) = 0;  // host memory the device copies fastest
  virtual void release_pinned(void* p) noexcept = 0;
  // Copies bytes between any two of the device's and the host's memory; done when it returns: a copy to
  // or from host memory waits for the device's queued work first (one from device to device, on a GPU,
  // is queued and does not make the host wait).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // Host memory to device memory in the order of the device's queued work, without the host waiting:
  // kernels queued after it see the data. src (pinned on a GPU) must stay unchanged until the host next
  // waits for the device (copy, synchronize). The host copies now.
  virtual void upload_queued(void* dst, const void* src, std::size_t bytes) = 0;
  // The same copy, after the work queued on the device so far, on a copy stream of its own, so that
  // it overlaps with later work; host memory on the other side must be pinned. The host copies now.
  virtual CopyInFlight copy_async(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void zero(void* p, std::size_t bytes) = 0;
  // The contents of [p, p + bytes) are no longer needed: afterwards they read as zero, and the device
  // may take the memory back until it is written again. Host: the whole pages inside go back to the
  // operating system (zero-filled on the next touch). CUDA: zeroed, the memory stays allocated. In
  // on-demand memory: the whole units inside lose their memory until committed again.
  virtual void discard(void* p, std::size_t bytes) = 0;
  virtual void synchronize() = 0;  // all work queued on the device is done
  // Bytes of device memory this process holds now (allocations and committed on-demand memory, not
  // pinned host memory) and held at most since the start or reset_peak(). The host device counts the
  // same calls (its on-demand unit is a page where a GPU's is 2 MiB), so CPU tests see what a GPU
  // would hold.
  virtual std::size_t held_bytes() const = 0;
  virtual std::size_t peak_bytes() const = 0;
  virtual void reset_peak() = 0;  // the peak from now on starts at what is held
  // How many times the host has waited for the device so far: copy, synchronize, a CopyInFlight's
  // wait, a discard that gives on-demand memory back. The host device counts the same calls as a GPU,
  // so a CPU run shows what a GPU run would wait for: an upper bound, since a GPU's device-to-device
  // copy is counted but does not wait. The MPI backend's staging of GPU buffers through host memory
  // happens on a GPU only, so the host device has nothing of it to count.
  std::uint64_t host_waits() const { return host_waits_.load(std::memory_order_relaxed); }

 protected:
  void count_host_wait() { host_waits_.fetch_add(1, std::memory_order_relaxed); }
  std::atomic<std::uint64_t>& host_wait_counter() { return host_waits_; }

 private:
  std::atomic<std::uint64_t> host_waits_{0};
};

Device& host_device();
// The CUDA device selected for this rank (select_cuda_device); fatal in builds without CUDA.
Device& cuda_device();
// The device of a kernel backend.
Device& device_for(kernels::Backend backend);

// Host memory from a device's pinned allocator, released with it.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(Device& device, std::size_t bytes) : device_(&device), data_(device.allocate_pinned(bytes)), bytes_(bytes) {}
  PinnedBuffer(PinnedBuffer&& o) noexcept : device_(o.device_), data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      if (data_) device_->release_pinned(data_);
      device_ = o.device_, data_ = o.data_, bytes_ = o.bytes_;
      o.data_ = nullptr;
    }
    return *this;
  }
  ~PinnedBuffer() {
    if (data_) device_->release_pinned(data_);
  }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  Device* device_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace dtrain
