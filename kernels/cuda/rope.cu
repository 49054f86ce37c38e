// CUDA backend: rotary position embedding in place, "rotate half" pairs, a thread per (row, pair) that
// turns that pair in every head with one sine and cosine.
// Angles in fp32 as the host computes them: angle = float(t0 + t) * rope_inv_freq(f, i, R).
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

template <typename KT>
__global__ void rope_kernel(KT* x, long rows, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, float sign) {
  const int half = R / 2;
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * half) return;
  const int pair = static_cast<int>(i % half);
  const long row = i / half;
  const float angle = static_cast<float>(t0 + row % T) * rope_inv_freq(f, pair, R);
  float s, c;
  sincosf(angle, &s, &c);
  s *= sign;
  for (int h = 0; h < H; ++h) {
    KT* v = x + row * W + static_cast<long>(h) * HD;
    const float a = ld(v[pair]), b = ld(v[pair + half]);
    v[pair] = st<KT>(a * c - b * s);
    v[pair + half] = st<KT>(b * c + a * s);
  }
}

template <typename KT>
void rotate(KT* x, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, float sign) {
  const long rows = static_cast<long>(B) * T, n = rows * (R / 2);
  if (n == 0) return;
  rope_kernel<<<blocks_for(n), kThreads>>>(x, rows, T, W, H, HD, R, f, t0, sign);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

void rope_forward(float* x, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0) { rotate(x, B, T, W, H, HD, R, f, t0, 1.0f); }
void rope_forward(bf16* x, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0) { rotate(x, B, T, W, H, HD, R, f, t0, 1.0f); }
void rope_forward(fp16* x, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0) { rotate(x, B, T, W, H, HD, R, f, t0, 1.0f); }
void rope_backward(float* dx, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0) {
  rotate(dx, B, T, W, H, HD, R, f, t0, -1.0f);
}
void rope_backward(bf16* dx, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0) {
  rotate(dx, B, T, W, H, HD, R, f, t0, -1.0f);
}
void rope_backward(fp16* dx, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0) {
  rotate(dx, B, T, W, H, HD, R, f, t0, -1.0f);
}

}  // namespace dtrain::kernels::cuda
