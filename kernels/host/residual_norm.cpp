// Host backend: the residual add and the norm after it (residual_layernorm_forward,
// residual_rmsnorm_forward) as the two kernels in turn, in every storage type: the values the CUDA
// backend's one-pass kernels equal bit for bit.
#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {
namespace {

template <typename KT>
void residual_layernorm(KT* res, KT* out, float* mean, float* rstd, const KT* inp1, const KT* inp2, const KT* weight, const KT* bias, long N,
                        int C, float eps) {
  residual_forward(res, inp1, inp2, N * C);
  layernorm_forward(out, mean, rstd, res, weight, bias, N, C, eps);
}

template <typename KT>
void residual_rmsnorm(KT* res, KT* out, float* rstd, const KT* inp1, const KT* inp2, const KT* weight, long N, int C, float eps) {
  residual_forward(res, inp1, inp2, N * C);
  rmsnorm_forward(out, rstd, res, weight, N, C, eps);
}

}  // namespace

#define DTRAIN_RESIDUAL_NORM(KT)                                                                                                   \
  void residual_layernorm_forward(KT* res, KT* out, float* mean, float* rstd, const KT* inp1, const KT* inp2, const KT* weight,    \
                                  const KT* bias, long N, int C, float eps) {                                                     \
    residual_layernorm(res, out, mean, rstd, inp1, inp2, weight, bias, N, C, eps);                                                 \
  }                                                                                                                                \
  void residual_rmsnorm_forward(KT* res, KT* out, float* rstd, const KT* inp1, const KT* inp2, const KT* weight, long N, int C,    \
                                float eps) {                                                                                       \
    residual_rmsnorm(res, out, rstd, inp1, inp2, weight, N, C, eps);                                                               \
  }
DTRAIN_RESIDUAL_NORM(float)
DTRAIN_RESIDUAL_NORM(bf16)
DTRAIN_RESIDUAL_NORM(fp16)
#undef DTRAIN_RESIDUAL_NORM

}  // namespace dtrain::kernels::host
