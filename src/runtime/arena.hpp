// An arena: one allocation of a device's memory (host or GPU), carved into tensors by offset tables.
// dtrain allocates a few per rank (parameters, gradients, optimizer state, activations), all before
// the first step; the training loop never allocates.
#pragma once
#include <cstddef>

#include "runtime/device.hpp"

namespace dtrain {

class Arena {
 public:
  Arena() = default;
  // bytes = 0 gives an empty arena (null data). on_demand: Device::reserve's memory, which must be
  // committed before use.
  Arena(Device& device, std::size_t bytes, bool on_demand = false)
      : device_(&device), data_(bytes ? (on_demand ? device.reserve(bytes) : device.allocate(bytes)) : nullptr), bytes_(bytes) {}
  Arena(Arena&& o) noexcept : device_(o.device_), data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  Arena& operator=(Arena&& o) noexcept {
    if (this != &o) {
      release();
      device_ = o.device_, data_ = o.data_, bytes_ = o.bytes_;
      o.data_ = nullptr;
    }
    return *this;
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() { release(); }

  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  void zero() { device_->zero(data_, bytes_); }
  // Bytes [begin, end) read as zero afterwards and hold no memory until written (Device::discard).
  void discard(std::size_t begin, std::size_t end) {
    if (begin < end) device_->discard(static_cast<char*>(data_) + begin, end - begin);
  }
  // Bytes [begin, end) backed (on-demand memory; a no-op otherwise).
  void commit(std::size_t begin, std::size_t end) {
    if (begin < end) device_->commit(static_cast<char*>(data_) + begin, end - begin);
  }
  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device& device() const { return *device_; }

 private:
  void release() {
    if (data_) device_->release(data_);
    data_ = nullptr;
  }
  Device* device_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace dtrain
