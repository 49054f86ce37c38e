// fp32 host values to and from n elements of storage type T (float, bf16, fp16) in a device's memory:
// converted on the host (kernels/host), through a staged host copy of T where the memory is a GPU's.
#pragma once
#include <vector>

#include "kernels/kernels.hpp"
#include "runtime/device.hpp"

namespace dtrain {

template <typename T>
void write_values(Device& device, T* dest /*(n), device memory*/, const float* values /*(n)*/, long n) {
  if (device.is_host()) return kernels::host::narrow(dest, values, n);
  std::vector<T> staged(static_cast<std::size_t>(n));
  kernels::host::narrow(staged.data(), values, n);
  device.copy(dest, staged.data(), sizeof(T) * staged.size());
}

template <typename T>
void read_values(Device& device, float* values /*(n)*/, const T* src /*(n), device memory*/, long n) {
  if (device.is_host()) return kernels::host::widen(values, src, n);
  std::vector<T> staged(static_cast<std::size_t>(n));
  device.copy(staged.data(), src, sizeof(T) * staged.size());
  kernels::host::widen(values, staged.data(), n);
}

}  // namespace dtrain
