// CUDA backend: dense layers (matmul_forward/backward and their wide-output forms) on cuBLAS, and the
// process's cuBLAS handle. Row-major (N,IC) x (OC,IC)^T is the column-major product
// weight^T-as-stored x inp, as in llm.c. The bias is added in cuBLASLt's epilogue (gemm_bias.cu), or
// where it cannot be, bias rows are filled first and the GEMM adds (beta = 1); the bias gradient is a
// deterministic column sum.
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {

cublasHandle_t cublas() {
  static const cublasHandle_t handle = [] {
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    // No TF32 unless a compute type asks for it, and no reduced-precision (bf16, fp16) summing of
    // split-K partial results: 16-bit GEMMs accumulate in fp32 all the way.
    CUBLAS_CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    return h;
  }();
  return handle;
}

namespace {

template <typename KT, typename OT>
__global__ void bias_rows_kernel(OT* out, const KT* bias, long N, int OC) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < N * OC) out[i] = st<OT>(ld(bias[i % OC]));
}

template <typename KT, typename OT>
void matmul_fw(OT* out /*(N,OC)*/, const KT* inp /*(N,IC)*/, const KT* weight /*(OC,IC)*/, const KT* bias /*(OC) or null*/, long N,
             int IC, int OC) {
  if (bias && gemm_bias(true, false, OC, static_cast<int>(N), IC, weight, IC, inp, IC, bias, out)) return;
  if (bias) {
    bias_rows_kernel<<<blocks_for(N * OC), kThreads>>>(out, bias, N, OC);
    DTRAIN_LAUNCH_CHECK();
  }
  gemm(true, false, OC, static_cast<int>(N), IC, 1.0f, weight, IC, 0, inp, IC, 0, bias ? 1.0f : 0.0f, out, OC, 0);
}

template <typename KT>
struct ColumnOf {
  const KT* x;
  int C;
  __device__ void operator()(long r, int c, float (&v)[1]) const { v[0] = ld(x[r * C + c]); }
};

template <typename KT, typename DT>
void matmul_bw(DT* dinp /*(N,IC) or null*/, float* dweight /*(OC,IC)*/, float* dbias /*(OC) or null*/, const KT* dout /*(N,OC)*/,
              const KT* inp /*(N,IC)*/, const KT* weight /*(OC,IC)*/, long N, int IC, int OC) {
  const int n = static_cast<int>(N);
  if (dinp) gemm(false, false, IC, n, OC, 1.0f, weight, IC, 0, dout, OC, 0, 0.0f, dinp, IC, 0);
  gemm(false, true, IC, OC, n, 1.0f, inp, IC, 0, dout, OC, 0, 1.0f, dweight, IC, 0);
  if (dbias) column_sum(dbias, N, OC, ColumnOf<KT>{dout, OC});
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, long N, int IC, int OC) {
  matmul_fw(out, inp, weight, bias, N, IC, OC);
}
void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, long N, int IC, int OC) {
  matmul_fw(out, inp, weight, bias, N, IC, OC);
}
void matmul_forward(fp16* out, const fp16* inp, const fp16* weight, const fp16* bias, long N, int IC, int OC) {
  matmul_fw(out, inp, weight, bias, N, IC, OC);
}
void matmul_forward_wide(float* out, const float* inp, const float* weight, const float* bias, long N, int IC, int OC) {
  matmul_fw(out, inp, weight, bias, N, IC, OC);
}
void matmul_forward_wide(float* out, const bf16* inp, const bf16* weight, const bf16* bias, long N, int IC, int OC) {
  matmul_fw(out, inp, weight, bias, N, IC, OC);
}
void matmul_forward_wide(float* out, const fp16* inp, const fp16* weight, const fp16* bias, long N, int IC, int OC) {
  matmul_fw(out, inp, weight, bias, N, IC, OC);
}
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight, long N,
                     int IC, int OC) {
  matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}
void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight, long N,
                     int IC, int OC) {
  matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}
void matmul_backward(fp16* dinp, float* dweight, float* dbias, const fp16* dout, const fp16* inp, const fp16* weight, long N,
                     int IC, int OC) {
  matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}
void matmul_backward_wide(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                          long N, int IC, int OC) {
  matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}
void matmul_backward_wide(float* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                          long N, int IC, int OC) {
  matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}
void matmul_backward_wide(float* dinp, float* dweight, float* dbias, const fp16* dout, const fp16* inp, const fp16* weight,
                          long N, int IC, int OC) {
  matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}

}  // namespace dtrain::kernels::cuda
