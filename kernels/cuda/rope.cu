// CUDA backend: rotary position embedding in place, "rotate half" pairs, a thread per (row, pair) that
// turns that pair in every head with one sine and cosine.
// Angles in fp32 as the host computes them: angle = float(p) * rope_inv_freq(f, i, R), p = positions[row] or t0 + t.
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

template <typename KT>
__global__ void rope_kernel(KT* x, long rows, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, const int* positions,
                            float sign) {
  const int half = R / 2;
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * half) return;
  const int pair = static_cast<int>(i % half);
  const long row = i / half;
  const float angle = static_cast<float>(positions ? positions[row] : t0 + row % T) * rope_inv_freq(f, pair, R);
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
void rotate(KT* x, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, const int* positions, float sign) {
  const long rows = static_cast<long>(B) * T, n = rows * (R / 2);
  if (n == 0) return;
  rope_kernel<<<blocks_for(n), kThreads>>>(x, rows, T, W, H, HD, R, f, t0, positions, sign);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

#define DTRAIN_ROPE(KT)                                                                                                    \
  void rope_forward(KT* x, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, const int* positions) {   \
    rotate(x, B, T, W, H, HD, R, f, t0, positions, 1.0f);                                                                  \
  }                                                                                                                        \
  void rope_backward(KT* dx, int B, int T, int W, int H, int HD, int R, RopeFrequencies f, int t0, const int* positions) { \
    rotate(dx, B, T, W, H, HD, R, f, t0, positions, -1.0f);                                                                \
  }
DTRAIN_ROPE(float)
DTRAIN_ROPE(bf16)
DTRAIN_ROPE(fp16)
#undef DTRAIN_ROPE

}  // namespace dtrain::kernels::cuda
