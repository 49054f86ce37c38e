// Host backend: optimizer and precision kernels on float vectors (sum_squares, step_factor, fill,
// adamw_update, and the fp32 cases of narrow and widen). The bf16 compute copy of adamw_update is in
// bf16.cpp.
#include "kernels/adamw_math.hpp"
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cmath>
#include <cstring>

namespace dtrain::kernels::host {

void sum_squares(double* sum /*(1)*/, const float* x /*(n)*/, long n) {
  // Double accumulation in 8 interleaved lanes, lanes then added in order: one fixed summation order,
  // so the result is bit-reproducible (a plain loop: a threaded reduction would change the order).
  constexpr int kDLanes = 8;
  double acc[kDLanes] = {};
  long i = 0;
  for (; i + kDLanes <= n; i += kDLanes)
    for (int l = 0; l < kDLanes; ++l) {
      const double v = x[i + l];
      acc[l] += v * v;
    }
  for (int l = 0; i < n; ++i, ++l) {
    const double v = x[i];
    acc[l] += v * v;
  }
  double s = 0.0;
  for (int l = 0; l < kDLanes; ++l) s += acc[l];
  *sum += s;
}

void step_factor(float* factor, const double* sums, double tokens, double loss_scale, double clip) {
  *factor = step_grad_factor(sums[0], sums[1], tokens, loss_scale, clip);
}

void fill(float* x /*(n)*/, float value, long n) {
  for (long i = 0; i < n; ++i) x[i] = value;
}

void narrow(float* out /*(n)*/, const float* inp /*(n)*/, long n) {
  if (out != inp) std::memcpy(out, inp, sizeof(float) * static_cast<std::size_t>(n));
}

void widen(float* out /*(n)*/, const float* inp /*(n)*/, long n) { narrow(out, inp, n); }

void adamw_update(float* master, float* copy /*or null*/, float* m, float* v, const float* grad, const float* grad_factor_p,
                  const AdamRun* runs /*(count)*/, int count, long /*elements*/, float lr, float beta1, float beta2, float eps, int t) {
  const float grad_factor = *grad_factor_p;
  if (!std::isfinite(grad_factor)) return;  // the step's loss or gradient norm was not finite: no update
  const AdamStep s = adam_step(lr, beta1, beta2, eps, t);
  for (int r = 0; r < count; ++r) {
    const long n = runs[r].count;
    const float weight_decay = runs[r].weight_decay;
    float* __restrict__ p = master + runs[r].offset;      // (n)
    float* __restrict__ mm = m + runs[r].offset;          // (n)
    float* __restrict__ vv = v + runs[r].offset;          // (n)
    const float* __restrict__ g = grad + runs[r].offset;  // (n)
    const long chunks = (n + kChunk - 1) / kChunk;
    Kokkos::parallel_for(
        "adamw_update", HostRange(0, chunks), KOKKOS_LAMBDA(const long ch) {
          const long begin = ch * kChunk;
          const long end = begin + kChunk < n ? begin + kChunk : n;
          for (long i = begin; i < end; ++i) p[i] = adamw_element(p[i], g[i] * grad_factor, mm[i], vv[i], weight_decay, s);
        });
    if (copy && copy != master) narrow(copy + runs[r].offset, p, n);
  }
}

}  // namespace dtrain::kernels::host
