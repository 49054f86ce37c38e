// Host backend: dense layer out = inp @ weight^T + bias (matmul_forward, matmul_backward, and their
// wide-output forms, which in fp32 are the same), on CBLAS sgemm.
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <cblas.h>

namespace dtrain::kernels::host {

void matmul_forward(float* out /*(N,OC)*/, const float* inp /*(N,IC)*/, const float* weight /*(OC,IC)*/,
                    const float* bias /*(OC) or null*/, long N, int IC, int OC) {
  float beta = 0.0f;
  if (bias) {
    // out starts as the bias row; sgemm then adds inp @ weight^T (beta = 1).
    Kokkos::parallel_for(
        "matmul_forward_bias", HostRange(0, N), KOKKOS_LAMBDA(const long i) {
          float* __restrict__ o = out + i * OC;   // (OC)
          for (int j = 0; j < OC; ++j) o[j] = bias[j];
        });
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(N), OC, IC, 1.0f, inp, IC,
              weight, IC, beta, out, OC);
}

void matmul_backward(float* dinp /*(N,IC) or null*/, float* dweight /*(OC,IC) or null*/, float* dbias /*(OC) or null*/,
                     const float* dout /*(N,OC)*/, const float* inp /*(N,IC)*/, const float* weight /*(OC,IC)*/,
                     long N, int IC, int OC) {
  // dinp = dout @ weight
  if (dinp)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(N), IC, OC, 1.0f, dout, OC,
                weight, IC, 0.0f, dinp, IC);
  // dweight += dout^T @ inp
  if (dweight)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, static_cast<int>(N), 1.0f, dout, OC, inp, IC,
                1.0f, dweight, IC);
  if (!dbias) return;
  // dbias += column sums of dout: one row-ordered pass (race-free, bit-reproducible in any space).
  float* __restrict__ db = dbias;   // (OC)
  for (long i = 0; i < N; ++i) {
    const float* __restrict__ d = dout + i * OC;   // (OC)
    for (int j = 0; j < OC; ++j) db[j] += d[j];
  }
}

void matmul_forward_wide(float* out /*(N,OC)*/, const float* inp /*(N,IC)*/, const float* weight /*(OC,IC)*/,
                         const float* bias /*(OC) or null*/, long N, int IC, int OC) {
  matmul_forward(out, inp, weight, bias, N, IC, OC);
}

void matmul_backward_wide(float* dinp /*(N,IC)*/, float* dweight /*(OC,IC)*/, float* dbias /*(OC) or null*/,
                          const float* dout /*(N,OC)*/, const float* inp /*(N,IC)*/, const float* weight /*(OC,IC)*/,
                          long N, int IC, int OC) {
  matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}

}  // namespace dtrain::kernels::host
