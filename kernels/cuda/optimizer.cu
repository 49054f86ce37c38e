// CUDA backend: the fused AdamW step (moments, bias correction, decoupled weight decay and, in bf16
// and fp16 runs, the rounded compute copy in one pass, every tensor of an optimizer range in one
// launch) and sum_squares accumulated in double in a fixed order (block partials into a device array,
// then one thread adds them in order to the caller's device variable): the same bits every run, and
// nothing for the host to wait for.
#include <cmath>

#include "kernels/adamw_math.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kReduceBlocks = 512;
constexpr int kReduceThreads = 256;
__device__ double g_partials[kReduceBlocks];

// A thread per element of the runs laid end to end: the element's run by binary search over the runs'
// first elements (a few cached loads), then the update.
template <typename KT>
__global__ void adamw_kernel(float* master, KT* copy, float* m, float* v, const float* grad, const float* grad_factor_p,
                             const AdamRun* runs, int count, long elements, AdamStep s) {
  const long j = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float grad_factor = *grad_factor_p;
  if (j >= elements || !isfinite(grad_factor)) return;  // a non-finite factor: the step's update is skipped
  int lo = 0, hi = count - 1;  // the last run whose first element is at or before j
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (runs[mid].first <= j)
      lo = mid;
    else
      hi = mid - 1;
  }
  const AdamRun run = runs[lo];
  const long i = run.offset + (j - run.first);
  const float updated = adamw_element(master[i], grad[i] * grad_factor, m[i], v[i], run.weight_decay, s);
  master[i] = updated;
  if (copy) copy[i] = st<KT>(updated);
}

__global__ void step_factor_kernel(float* factor, const double* sums, double tokens, double loss_scale, double clip) {
  *factor = step_grad_factor(sums[0], sums[1], tokens, loss_scale, clip);
}

__global__ void partial_squares_kernel(const float* x, long n) {
  __shared__ double part[kReduceThreads];
  double acc = 0.0;
  for (long i = static_cast<long>(blockIdx.x) * kReduceThreads + threadIdx.x; i < n; i += static_cast<long>(kReduceBlocks) * kReduceThreads) {
    const double v = x[i];
    acc += v * v;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) g_partials[blockIdx.x] = part[0];
}

__global__ void sum_partials_kernel(double* sum) {
  if (threadIdx.x != 0) return;
  double s = 0.0;
  for (int b = 0; b < kReduceBlocks; ++b) s += g_partials[b];
  *sum += s;
}

template <typename KT>
void adamw(float* master, KT* copy, float* m, float* v, const float* grad, const float* grad_factor, const AdamRun* runs, int count,
           long elements, float lr, float beta1, float beta2, float eps, int t) {
  if (count <= 0 || elements <= 0) return;
  adamw_kernel<<<blocks_for(elements), kThreads>>>(master, copy, m, v, grad, grad_factor, runs, count, elements,
                                                   adam_step(lr, beta1, beta2, eps, t));
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

void sum_squares(double* sum, const float* x, long n) {
  partial_squares_kernel<<<kReduceBlocks, kReduceThreads>>>(x, n);
  DTRAIN_LAUNCH_CHECK();
  sum_partials_kernel<<<1, 32>>>(sum);
  DTRAIN_LAUNCH_CHECK();
}

void step_factor(float* factor, const double* sums, double tokens, double loss_scale, double clip) {
  step_factor_kernel<<<1, 1>>>(factor, sums, tokens, loss_scale, clip);
  DTRAIN_LAUNCH_CHECK();
}

void adamw_update(float* master, float* copy, float* m, float* v, const float* grad, const float* grad_factor, const AdamRun* runs, int count,
                  long elements, float lr, float beta1, float beta2, float eps, int t) {
  adamw(master, copy == master ? static_cast<float*>(nullptr) : copy, m, v, grad, grad_factor, runs, count, elements, lr, beta1, beta2, eps, t);
}
void adamw_update(float* master, bf16* copy, float* m, float* v, const float* grad, const float* grad_factor, const AdamRun* runs, int count,
                  long elements, float lr, float beta1, float beta2, float eps, int t) {
  adamw(master, copy, m, v, grad, grad_factor, runs, count, elements, lr, beta1, beta2, eps, t);
}
void adamw_update(float* master, fp16* copy, float* m, float* v, const float* grad, const float* grad_factor, const AdamRun* runs, int count,
                  long elements, float lr, float beta1, float beta2, float eps, int t) {
  adamw(master, copy, m, v, grad, grad_factor, runs, count, elements, lr, beta1, beta2, eps, t);
}

}  // namespace dtrain::kernels::cuda
