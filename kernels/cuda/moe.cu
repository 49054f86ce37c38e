// CUDA backend: the mixture-of-experts router (a thread per token: softmax over the experts, top-k by
// repeated selection, ties to the lower index; its backward) and the row movements between token
// order and expert-major order (a thread per element; the combine and the dot products sum in a fixed
// order, no atomics).
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"
#include "kernels/router_top_k.hpp"

namespace dtrain::kernels::cuda {
namespace {

__global__ void router_forward_kernel(float* probs, int* idx, float* w, const float* logits, long N, int E, int K) {
  const long t = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float* x = logits + t * E;
  float* p = probs + t * E;
  float mx = x[0];
  for (int e = 1; e < E; ++e) mx = max_keep_nan(mx, x[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += (p[e] = expf(x[e] - mx));
  for (int e = 0; e < E; ++e) p[e] /= sum;
  router_top_k(p, E, K, idx + t * K, w + t * K);
}

__global__ void router_backward_kernel(float* dlogits, const float* probs, const int* idx, const float* dw, const float* daux,
                                       long N, int E, int K) {
  const long t = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= N) return;
  const float* p = probs + t * E;
  float* d = dlogits + t * E;
  for (int e = 0; e < E; ++e) d[e] = daux ? daux[e] : 0.0f;
  for (int j = 0; j < K; ++j) d[idx[t * K + j]] += dw[t * K + j];
  float dot = 0.0f;
  for (int e = 0; e < E; ++e) dot += p[e] * d[e];
  for (int e = 0; e < E; ++e) d[e] = p[e] * (d[e] - dot);
}

template <typename KT>
__global__ void gather_rows_kernel(KT* out, const KT* inp, const int* src, const float* scale, long R, int C) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= R * C) return;
  const long r = i / C;
  const KT x = inp[static_cast<long>(src[r]) * C + i % C];
  out[i] = scale ? st<KT>(ld(x) * scale[r]) : x;
}

__global__ void combine_kernel(float* out, const float* rows, const int* pos, const float* w, long N, int K, int C, bool accumulate) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  const long t = i / C;
  const int c = static_cast<int>(i % C);
  float acc = accumulate ? out[i] : 0.0f;
  for (int j = 0; j < K; ++j) {
    const int r = pos[t * K + j];
    if (r < 0) continue;
    const float y = rows[static_cast<long>(r) * C + c];
    acc += w ? w[t * K + j] * y : y;
  }
  out[i] = acc;
}

// A warp per assignment: lane-strided products, then a fixed-order warp sum.
template <typename KT>
__global__ void row_dots_kernel(float* dw, const KT* dy, const float* rows, const int* pos, long N, int K, int C) {
  const long i = (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (i >= N * K) return;
  const int r = pos[i];
  float acc = 0.0f;
  if (r >= 0)
    for (int c = lane; c < C; c += 32) acc += ld(dy[(i / K) * C + c]) * rows[static_cast<long>(r) * C + c];
  acc = warp_sum(acc);
  if (lane == 0) dw[i] = acc;
}

template <typename KT>
void gather(KT* out, const KT* inp, const int* src, const float* scale, long R, int C) {
  gather_rows_kernel<<<blocks_for(R * C), kThreads>>>(out, inp, src, scale, R, C);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void dots(float* dw, const KT* dy, const float* rows, const int* pos, long N, int K, int C) {
  row_dots_kernel<<<blocks_for(N * K * 32), kThreads>>>(dw, dy, rows, pos, N, K, C);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

void moe_router_forward(float* probs, int* idx, float* w, const float* logits, long N, int E, int K) {
  router_forward_kernel<<<blocks_for(N), kThreads>>>(probs, idx, w, logits, N, E, K);
  DTRAIN_LAUNCH_CHECK();
}
void moe_router_backward(float* dlogits, const float* probs, const int* idx, const float* dw, const float* daux, long N, int E,
                         int K) {
  router_backward_kernel<<<blocks_for(N), kThreads>>>(dlogits, probs, idx, dw, daux, N, E, K);
  DTRAIN_LAUNCH_CHECK();
}
void moe_combine(float* out, const float* rows, const int* pos, const float* w, long N, int K, int C, bool accumulate) {
  combine_kernel<<<blocks_for(N * C), kThreads>>>(out, rows, pos, w, N, K, C, accumulate);
  DTRAIN_LAUNCH_CHECK();
}

#define DTRAIN_MOE(KT)                                                                                                                       \
  void moe_gather_rows(KT* out, const KT* inp, const int* src, const float* scale, long R, int C) { gather(out, inp, src, scale, R, C); }    \
  void moe_row_dots(float* dw, const KT* dy, const float* rows, const int* pos, long N, int K, int C) { dots(dw, dy, rows, pos, N, K, C); }
DTRAIN_MOE(float)
DTRAIN_MOE(bf16)
DTRAIN_MOE(fp16)
#undef DTRAIN_MOE

}  // namespace dtrain::kernels::cuda
