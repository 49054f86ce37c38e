// Host backend: a dense layer and the GELU after it, forward and backward (matmul_forward_gelu,
// matmul_backward_gelu), as the two kernels each is made of, for every storage type.
#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {
namespace {

template <typename S>
void forward(S* out, S* pre, const S* inp, const S* weight, const S* bias, long N, int IC, int OC) {
  matmul_forward(pre, inp, weight, bias, N, IC, OC);
  gelu_forward(out, pre, N * OC);
}

template <typename S>
void backward(S* dpre, S* dact, float* dweight, float* dbias, const S* dout, const S* act, const S* weight, const S* pre, long N,
              int IC, int OC) {
  matmul_backward(dact, dweight, dbias, dout, act, weight, N, IC, OC);
  gelu_backward(dpre, pre, dact, N * IC);
}

}  // namespace

void matmul_forward_gelu(float* out, float* pre, const float* inp, const float* weight, const float* bias, long N, int IC, int OC) {
  forward(out, pre, inp, weight, bias, N, IC, OC);
}
void matmul_forward_gelu(bf16* out, bf16* pre, const bf16* inp, const bf16* weight, const bf16* bias, long N, int IC, int OC) {
  forward(out, pre, inp, weight, bias, N, IC, OC);
}
void matmul_forward_gelu(fp16* out, fp16* pre, const fp16* inp, const fp16* weight, const fp16* bias, long N, int IC, int OC) {
  forward(out, pre, inp, weight, bias, N, IC, OC);
}
void matmul_backward_gelu(float* dpre, float* dact, float* dweight, float* dbias, const float* dout, const float* act,
                          const float* weight, const float* pre, long N, int IC, int OC) {
  backward(dpre, dact, dweight, dbias, dout, act, weight, pre, N, IC, OC);
}
void matmul_backward_gelu(bf16* dpre, bf16* dact, float* dweight, float* dbias, const bf16* dout, const bf16* act,
                          const bf16* weight, const bf16* pre, long N, int IC, int OC) {
  backward(dpre, dact, dweight, dbias, dout, act, weight, pre, N, IC, OC);
}
void matmul_backward_gelu(fp16* dpre, fp16* dact, float* dweight, float* dbias, const fp16* dout, const fp16* act,
                          const fp16* weight, const fp16* pre, long N, int IC, int OC) {
  backward(dpre, dact, dweight, dbias, dout, act, weight, pre, N, IC, OC);
}

}  // namespace dtrain::kernels::host
