// Host backend: rotary position embedding in place (rope_forward, rope_backward), "rotate half" pairs.
// The angles are computed as Hugging Face and Megatron do, in fp32: inv_freq[i] = rope_inv_freq (1 /
// base^(2i/R), or its Llama 3.1 remapping), angle = float(p) * inv_freq[i], p = positions[b,t] or t0 + t.
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cmath>

namespace dtrain::kernels::host {
namespace {

// x (B,T,W): heads [0,H) of HD elements at the start of each row, row t at position t0 + t; sign +1
// turns forward, -1 back.
void rotate(float* x, int B, int T, int W, int H, int HD, int R, const RopeFrequencies& f, int t0, const int* positions, float sign) {
  const int half = R / 2;
  Kokkos::parallel_for(
      "rope", HostRange(0, static_cast<long>(B) * T), KOKKOS_LAMBDA(const long row) {
        const float t = static_cast<float>(positions ? positions[row] : t0 + row % T);
        float* __restrict__ r = x + row * W;  // (W)
        for (int i = 0; i < half; ++i) {
          const float angle = t * rope_inv_freq(f, i, R);
          const float c = std::cos(angle), s = sign * std::sin(angle);
          for (int h = 0; h < H; ++h) {
            float* __restrict__ v = r + static_cast<long>(h) * HD;  // (HD)
            const float a = v[i], b = v[i + half];
            v[i] = a * c - b * s;
            v[i + half] = b * c + a * s;
          }
        }
      });
}

}  // namespace

void rope_forward(float* x /*(B,T,W)*/, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, const int* positions) {
  rotate(x, B, T, W, H, HD, R, f, t0, positions, 1.0f);
}

void rope_backward(float* dx /*(B,T,W)*/, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, const int* positions) {
  rotate(dx, B, T, W, H, HD, R, f, t0, positions, -1.0f);
}

}  // namespace dtrain::kernels::host
