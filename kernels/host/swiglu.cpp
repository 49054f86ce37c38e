// Host backend: SwiGLU, Llama's gated MLP activation (swiglu_forward, swiglu_backward):
// out = silu(g) * u with silu(g) = g / (1 + exp(-g)), rows packed as [g (F) | u (F)].
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {

void swiglu_forward(float* out /*(N,F)*/, const float* inp /*(N,2F)*/, long N, int F) {
  Kokkos::parallel_for(
      "swiglu_forward", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        const float* __restrict__ g = inp + i * 2 * F;  // (F)
        const float* __restrict__ u = g + F;            // (F)
        float* __restrict__ o = out + i * F;            // (F)
        for (int k = 0; k < F; ++k) o[k] = g[k] / (1.0f + fast_exp(-g[k])) * u[k];
      });
}

// d/dg silu(g) = s (1 + g (1 - s)), s = sigmoid(g); d/du = silu(g).
void swiglu_backward(float* dinp /*(N,2F)*/, const float* inp /*(N,2F)*/, const float* dout /*(N,F)*/, long N, int F) {
  Kokkos::parallel_for(
      "swiglu_backward", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
        const float* __restrict__ g = inp + i * 2 * F;   // (F)
        const float* __restrict__ u = g + F;             // (F)
        const float* __restrict__ dy = dout + i * F;     // (F)
        float* __restrict__ dg = dinp + i * 2 * F;       // (F)
        float* __restrict__ du = dg + F;                 // (F)
        for (int k = 0; k < F; ++k) {
          const float s = 1.0f / (1.0f + fast_exp(-g[k]));
          dg[k] = dy[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));
          du[k] = dy[k] * g[k] * s;
        }
      });
}

}  // namespace dtrain::kernels::host
