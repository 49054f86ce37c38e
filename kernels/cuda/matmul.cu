// CUDA backend: dense layers (matmul_forward/backward and their wide-output forms) on cuBLAS, and the
// process's cuBLAS handle. Row-major (N,IC) x (OC,IC)^T is the column-major product
// weight^T-as-stored x inp, as in llm.c. The bias is added in cuBLASLt's epilogue (gemm_bias.cu), or
// where it cannot be, bias rows are filled first and the GEMM adds (beta = 1); the bias gradient is a
// deterministic column sum of the output gradient in 16-byte packs (matrix_column_sums). The
// MLP's GELU and its gradient ride on the epilogues of the layers beside them in bf16 and fp16
// (matmul_*_gelu; fp32 keeps the GELU's own passes).
#include <type_traits>

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

template <typename KT, typename DT>
void matmul_bw(DT* dinp /*(N,IC) or null*/, float* dweight /*(OC,IC) or null*/, float* dbias /*(OC) or null*/, const KT* dout /*(N,OC)*/,
              const KT* inp /*(N,IC)*/, const KT* weight /*(OC,IC)*/, long N, int IC, int OC) {
  const int n = static_cast<int>(N);
  if (dinp) gemm(false, false, IC, n, OC, 1.0f, weight, IC, 0, dout, OC, 0, 0.0f, dinp, IC, 0);
  if (dweight) gemm(false, true, IC, OC, n, 1.0f, inp, IC, 0, dout, OC, 0, 1.0f, dweight, IC, 0);  // dweight += inp^T dout
  // dbias += dout's column sums, in 16-byte packs. cuBLASLt's bias-gradient epilogue (BGRADB) instead
  // slowed the weight gradients' GEMMs: on an H100 at GPT-2 124M's shapes they and the adds took 5.65 ms
  // a step, the plain GEMMs 4.24 and these sums 1.70 (about 1.6 TB/s: a pass at the memory's 3 TB/s
  // would make this the faster way).
  if (dbias) matrix_column_sums(dbias, dout, N, OC);
}

// fp32 runs keep the GELU's own passes: cuBLASLt's GELU is not the host's to fp32 rounding (its
// derivative was 9.6e-6 of the largest output off on an H100, beyond the 9.5e-6 of reordered sums); a
// 16-bit run's storage rounding (2^-8, 2^-11) is far above that.
template <typename KT>
constexpr bool kGeluEpilogue = !std::is_same_v<KT, float>;

// The MLP's first layer and GELU: in one cuBLASLt call where it can, else the layer, then the GELU.
template <typename KT>
void matmul_fw_gelu(KT* out, KT* pre, const KT* inp, const KT* weight, const KT* bias, long N, int IC, int OC) {
  if constexpr (kGeluEpilogue<KT>)
    if (gemm_bias_gelu(true, false, OC, static_cast<int>(N), IC, weight, IC, inp, IC, bias, out, pre)) return;
  matmul_fw(pre, inp, weight, bias, N, IC, OC);
  gelu_forward(out, pre, N * OC);
}

// The MLP's second layer's backward through the GELU: the input gradient times gelu'(pre) in one
// cuBLASLt call where it can (dact unused), else dact = dout @ weight, then the GELU's gradient.
template <typename KT>
void matmul_bw_gelu(KT* dpre, KT* dact, float* dweight, float* dbias, const KT* dout, const KT* act, const KT* weight, const KT* pre,
                    long N, int IC, int OC) {
  if constexpr (kGeluEpilogue<KT>)
    if (gemm_dgelu(false, false, IC, static_cast<int>(N), OC, weight, IC, dout, OC, pre, dpre)) {
      matmul_bw(static_cast<KT*>(nullptr), dweight, dbias, dout, act, weight, N, IC, OC);
      return;
    }
  matmul_bw(dact, dweight, dbias, dout, act, weight, N, IC, OC);
  gelu_backward(dpre, pre, dact, N * IC);
}

}  // namespace

#define DTRAIN_MATMUL_GELU(KT)                                                                                                   \
  void matmul_forward_gelu(KT* out, KT* pre, const KT* inp, const KT* weight, const KT* bias, long N, int IC, int OC) {         \
    matmul_fw_gelu(out, pre, inp, weight, bias, N, IC, OC);                                                                     \
  }                                                                                                                              \
  void matmul_backward_gelu(KT* dpre, KT* dact, float* dweight, float* dbias, const KT* dout, const KT* act, const KT* weight,  \
                            const KT* pre, long N, int IC, int OC) {                                                             \
    matmul_bw_gelu(dpre, dact, dweight, dbias, dout, act, weight, pre, N, IC, OC);                                              \
  }
DTRAIN_MATMUL_GELU(float)
DTRAIN_MATMUL_GELU(bf16)
DTRAIN_MATMUL_GELU(fp16)
#undef DTRAIN_MATMUL_GELU

#define DTRAIN_MATMUL(KT)                                                                                                        \
  void matmul_forward(KT* out, const KT* inp, const KT* weight, const KT* bias, long N, int IC, int OC) {                        \
    matmul_fw(out, inp, weight, bias, N, IC, OC);                                                                                \
  }                                                                                                                              \
  void matmul_forward_wide(float* out, const KT* inp, const KT* weight, const KT* bias, long N, int IC, int OC) {                \
    matmul_fw(out, inp, weight, bias, N, IC, OC);                                                                                \
  }                                                                                                                              \
  void matmul_backward(KT* dinp, float* dweight, float* dbias, const KT* dout, const KT* inp, const KT* weight, long N, int IC,  \
                       int OC) {                                                                                                 \
    matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);                                                               \
  }                                                                                                                              \
  void matmul_backward_wide(float* dinp, float* dweight, float* dbias, const KT* dout, const KT* inp, const KT* weight, long N,  \
                            int IC, int OC) {                                                                                    \
    matmul_bw(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);                                                               \
  }
DTRAIN_MATMUL(float)
DTRAIN_MATMUL(bf16)
DTRAIN_MATMUL(fp16)
#undef DTRAIN_MATMUL

}  // namespace dtrain::kernels::cuda
