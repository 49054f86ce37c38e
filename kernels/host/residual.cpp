// Host backend: residual add and copies (residual_forward, copy, zero).
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cstring>

namespace dtrain::kernels::host {

void residual_forward(float* out /*(n)*/, const float* inp1 /*(n)*/, const float* inp2 /*(n)*/, long n) {
  const long chunks = (n + kChunk - 1) / kChunk;
  Kokkos::parallel_for(
      "residual_forward", HostRange(0, chunks), KOKKOS_LAMBDA(const long ch) {
        const long begin = ch * kChunk;
        const long end = begin + kChunk < n ? begin + kChunk : n;
        // out may alias an input (an in-place residual stream): no __restrict__, and the loop has no
        // loop-carried dependence either way.
#pragma GCC ivdep
        for (long i = begin; i < end; ++i) out[i] = inp1[i] + inp2[i];
      });
}

void copy(float* out /*(n)*/, const float* inp /*(n)*/, long n) {
  if (out != inp) std::memcpy(out, inp, sizeof(float) * static_cast<std::size_t>(n));
}

void zero(float* x /*(n)*/, long n) { std::memset(x, 0, sizeof(float) * static_cast<std::size_t>(n)); }

}  // namespace dtrain::kernels::host
