// Where a linear layer's (N,C) rows go when tensor parallelism may reduce them: fp32 partial sums (set
// `partial`; the caller reduces them over tp and rounds once), or, with nothing to reduce, rows of the
// compute type written directly (rounded once by the GEMM, the same rounding).
#pragma once
#include "kernels/kernels.hpp"
#include "model/weight_grads.hpp"

namespace dtrain {

template <typename T>
struct LinearOutput {
  T* rows = nullptr;
  float* partial = nullptr;  // set: fp32 partial sums over tp
};

// out (N,OC) (=) inp (N,IC) x weight (OC,IC)^T + bias.
template <typename T>
void linear_forward(const kernels::KernelTable<T>& k, LinearOutput<T> out, const T* inp, const T* weight, const T* bias, long N, int IC,
                    int OC) {
  if (out.partial)
    k.matmul_forward_wide(out.partial, inp, weight, bias, N, IC, OC);
  else
    k.matmul_forward(out.rows, inp, weight, bias, N, IC, OC);
}

// dinp (N,IC) (=), dweight and dbias (+=) of out = inp x weight^T + bias, from dout (N,OC); through wg
// (the weight half deferred in a split backward).
template <typename T>
void linear_backward(WeightGrads<T>& wg, LinearOutput<T> dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                     long N, int IC, int OC) {
  if (dinp.partial)
    wg.matmul_wide(dinp.partial, dweight, dbias, dout, inp, weight, N, IC, OC);
  else
    wg.matmul(dinp.rows, dweight, dbias, dout, inp, weight, N, IC, OC);
}

}  // namespace dtrain
