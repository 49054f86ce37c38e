// Host backend: GELU, tanh approximation (gelu_forward, gelu_backward).
// 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): written with the fast exp as
// x / (1 + exp(-2u)), which has no cancellation anywhere (unlike 1 + tanh(u) near u << 0).
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {

void gelu_forward(float* out /*(n)*/, const float* inp /*(n)*/, long n) {
  const long chunks = (n + kChunk - 1) / kChunk;
  Kokkos::parallel_for(
      "gelu_forward", HostRange(0, chunks), KOKKOS_LAMBDA(const long ch) {
        const long begin = ch * kChunk;
        const long end = begin + kChunk < n ? begin + kChunk : n;
        float* __restrict__ o = out;        // (n)
        const float* __restrict__ x = inp;  // (n)
        for (long i = begin; i < end; ++i) {
          const float xi = x[i];
          const float u = kGeluS * (xi + kGeluC * xi * xi * xi);
          o[i] = xi / (1.0f + fast_exp(-2.0f * u));
        }
      });
}

// d/dx [x s(2u)] = s + 2 x s (1 - s) u',  s = 1 / (1 + e), 1 - s = e s, e = exp(-2u),
// u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
void gelu_backward(float* dinp /*(n)*/, const float* inp /*(n)*/, const float* dout /*(n)*/, long n) {
  const long chunks = (n + kChunk - 1) / kChunk;
  Kokkos::parallel_for(
      "gelu_backward", HostRange(0, chunks), KOKKOS_LAMBDA(const long ch) {
        const long begin = ch * kChunk;
        const long end = begin + kChunk < n ? begin + kChunk : n;
        float* __restrict__ dx = dinp;       // (n)
        const float* __restrict__ x = inp;   // (n)
        const float* __restrict__ dy = dout; // (n)
        for (long i = begin; i < end; ++i) {
          const float xi = x[i];
          const float x2 = xi * xi;
          const float u = kGeluS * (xi + kGeluC * x2 * xi);
          const float du = kGeluS * (1.0f + 3.0f * kGeluC * x2);
          const float e = fast_exp(-2.0f * u);
          const float s = 1.0f / (1.0f + e);
          const float es = e * s;   // 1 - s without cancellation
          dx[i] = dy[i] * (s + 2.0f * xi * es * s * du);
        }
      });
}

}  // namespace dtrain::kernels::host
