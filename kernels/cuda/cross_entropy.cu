// CUDA backend: softmax cross-entropy over a vocabulary that may be split across ranks, a warp per
// row (a block per row for the backward). xent_loss adds the rows' losses in double in a fixed order (one block: each thread a strided
// set of rows, then a tree over the threads) to the caller's device variable, which the host reads
// when it needs it: the same bits on every run, and no wait.
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kReduceThreads = 1024;

template <typename KT>
__global__ void row_max_kernel(float* row_max, const KT* logits, long N, int V) {
  const long i = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (i >= N) return;
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += 32) m = max_keep_nan(m, ld(logits[i * V + v]));
  m = warp_max_keep_nan(m);
  if (threadIdx.x == 0) row_max[i] = m;
}

template <typename KT>
__global__ void row_sum_exp_kernel(float* row_sum, const KT* logits, const float* row_max, long N, int V) {
  const long i = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (i >= N) return;
  const float m = row_max[i];
  float s = 0.0f;
  for (int v = threadIdx.x; v < V; v += 32) s += expf(ld(logits[i * V + v]) - m);
  s = warp_sum(s);
  if (threadIdx.x == 0) row_sum[i] = s;
}

// Both in one pass: each lane keeps a running maximum over its 16-byte packs and rescales its sum when
// the maximum grows; the lanes' (maximum, sum) pairs combine at the end. A lane whose elements are all
// -inf so far has sum 0 (its terms are exp(-inf) = 0); a NaN logit makes the maximum NaN, as in row_max.
template <bool kVector, typename KT>
__global__ void row_max_sum_exp_kernel(float* row_max, float* row_sum, const KT* logits, long N, int V) {
  constexpr int P = kPack<KT>;
  const long i = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (i >= N) return;
  const KT* x = logits + i * V;
  float m = -INFINITY, s = 0.0f;
#pragma unroll 4
  for (int v = threadIdx.x * P; v < V; v += 32 * P) {
    float f[P];
    load_n<kVector>(f, x, v, V);
    float pm = -INFINITY;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      if (!kVector && v + k >= V) f[k] = -INFINITY;  // past the row: no term
      pm = max_keep_nan(pm, f[k]);
    }
    if (pm > m) s *= expf(m - pm), m = pm;  // a NaN maximum stays (no comparison with it holds)
    const float mu = m == -INFINITY ? 0.0f : m;
#pragma unroll
    for (int k = 0; k < P; ++k) s += expf(f[k] - mu);
  }
  const float M = warp_max_keep_nan(m);
  s = s == 0.0f ? 0.0f : s * expf(m - M);
  s = warp_sum(s);
  if (threadIdx.x == 0) row_max[i] = M, row_sum[i] = s;
}

template <typename KT>
__global__ void target_logit_kernel(float* target_logit, const KT* logits, const int* targets, int vocab_start, long N, int V) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N) return;
  const int col = targets[i] - vocab_start;
  target_logit[i] = col >= 0 && col < V ? ld(logits[i * V + col]) : 0.0f;
}

__global__ void loss_kernel(double* loss_sum, float* lse, const float* row_max, const float* row_sum, const float* target_logit,
                            const float* mask, long N) {
  __shared__ double part[kReduceThreads];
  double acc = 0.0;
  for (long i = threadIdx.x; i < N; i += kReduceThreads) {
    const float l = row_max[i] + logf(row_sum[i]);
    lse[i] = l;
    const double row = static_cast<double>(l) - target_logit[i];
    acc += mask ? row * mask[i] : row;  // a masked row's NaN still shows, as on the host
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0 && loss_sum) *loss_sum += part[0];
}

__global__ void loss_weights_kernel(float* dloss, const float* mask, float weight, long N) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < N) dloss[i] = mask ? weight * mask[i] : weight;
}

// dlogits[i,v] = (exp(logits[i,v] - lse[i]) - [v is target]) * dloss[i]; (p - 1) * dl on the target.
// A block per row, in 16-byte packs; in place (dlogits = logits) each thread reads its pack first.
template <bool kVector, typename KT>
__global__ void backward_kernel(KT* dlogits, const KT* logits, const float* lse, const int* targets, const float* dloss,
                                int vocab_start, int V) {
  constexpr int P = kPack<KT>;
  const long i = blockIdx.x;
  const float l = lse[i], dl = dloss[i];
  const int target = targets[i] - vocab_start;
  const KT* x = logits + i * V;
  KT* d = dlogits + i * V;
  for (int v = threadIdx.x * P; v < V; v += blockDim.x * P) {
    float f[P];
    load_n<kVector>(f, x, v, V);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float p = expf(f[k] - l);
      f[k] = (v + k == target ? p - 1.0f : p) * dl;
    }
    store_n<kVector>(d, f, v, V);
  }
}

template <typename KT>
void row_max(float* out, const KT* logits, long N, int V) {
  row_max_kernel<<<blocks_for(N, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(out, logits, N, V);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void row_sum_exp(float* out, const KT* logits, const float* m, long N, int V) {
  row_sum_exp_kernel<<<blocks_for(N, kWarpsPerBlock), dim3(32, kWarpsPerBlock)>>>(out, logits, m, N, V);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void row_max_sum_exp(float* m, float* s, const KT* logits, long N, int V) {
  if (N <= 0) return;
  const dim3 grid(blocks_for(N, kWarpsPerBlock)), block(32, kWarpsPerBlock);
  if (packs_fit<KT>(V, logits))
    row_max_sum_exp_kernel<true><<<grid, block>>>(m, s, logits, N, V);
  else
    row_max_sum_exp_kernel<false><<<grid, block>>>(m, s, logits, N, V);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void target_logit(float* out, const KT* logits, const int* targets, int vocab_start, long N, int V) {
  target_logit_kernel<<<blocks_for(N), kThreads>>>(out, logits, targets, vocab_start, N, V);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void xent_bw(KT* dlogits, const KT* logits, const float* lse, const int* targets, const float* dloss, int vocab_start, long N, int V) {
  if (N <= 0) return;
  if (packs_fit<KT>(V, dlogits, logits))
    backward_kernel<true><<<N, kThreads>>>(dlogits, logits, lse, targets, dloss, vocab_start, V);
  else
    backward_kernel<false><<<N, kThreads>>>(dlogits, logits, lse, targets, dloss, vocab_start, V);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

void xent_loss(double* loss_sum, float* lse, const float* row_max_in, const float* row_sum, const float* target, const float* mask, long N) {
  loss_kernel<<<1, kReduceThreads>>>(loss_sum, lse, row_max_in, row_sum, target, mask, N);
  DTRAIN_LAUNCH_CHECK();
}
void loss_weights(float* dloss, const float* mask, float weight, long N) {
  if (N <= 0) return;
  loss_weights_kernel<<<blocks_for(N), kThreads>>>(dloss, mask, weight, N);
  DTRAIN_LAUNCH_CHECK();
}

#define DTRAIN_CROSS_ENTROPY(KT)                                                                                                        \
  void xent_row_max(float* row_max_out, const KT* logits, long N, int V) { row_max(row_max_out, logits, N, V); }                        \
  void xent_row_sum_exp(float* row_sum, const KT* logits, const float* m, long N, int V) { row_sum_exp(row_sum, logits, m, N, V); }     \
  void xent_row_max_sum_exp(float* m, float* s, const KT* logits, long N, int V) { row_max_sum_exp(m, s, logits, N, V); }               \
  void xent_target_logit(float* t, const KT* logits, const int* targets, int vocab_start, long N, int V) {                              \
    target_logit(t, logits, targets, vocab_start, N, V);                                                                                \
  }                                                                                                                                     \
  void xent_backward(KT* dlogits, const KT* logits, const float* lse, const int* targets, const float* dloss, int vocab_start, long N,  \
                     int V) {                                                                                                           \
    xent_bw(dlogits, logits, lse, targets, dloss, vocab_start, N, V);                                                                   \
  }
DTRAIN_CROSS_ENTROPY(float)
DTRAIN_CROSS_ENTROPY(bf16)
DTRAIN_CROSS_ENTROPY(fp16)
#undef DTRAIN_CROSS_ENTROPY

}  // namespace dtrain::kernels::cuda
