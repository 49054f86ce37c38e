// An arena: one 64-byte-aligned allocation of floats, carved into tensors by offset tables.
// dtrain allocates four per rank (parameters, gradients, optimizer moments, activations), all before
// the first step; the training loop never allocates.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace dtrain {

class Arena {
 public:
  Arena() = default;
  explicit Arena(std::size_t count) : count_(count) {
    const std::size_t bytes = ((count * sizeof(float) + 63) / 64) * 64;
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes > 0 ? bytes : 64)));
    if (!data_) throw std::bad_alloc();
    std::memset(data_.get(), 0, bytes > 0 ? bytes : 64);
  }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(float); }
  void zero() { std::memset(data_.get(), 0, bytes()); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  std::size_t count_ = 0;
};

}  // namespace dtrain
