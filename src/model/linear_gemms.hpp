// LinearGemms<T>: the GEMMs of the blocks' linear layers (the QKV product, the attention projection,
// the dense MLP's two layers), forward and backward: the kernels of the run's storage type (the
// backward's weight half through WeightGrads, which a split backward defers, fp8's too), or in fp8 runs
// (system.precision = fp8) fp8 GEMMs. MoE experts, the router and the LM head stay bf16 there.
//
// fp8 follows Transformer Engine's HYBRID format: inputs and weights in E4M3, output gradients in E5M2
// (its wider range), fp32 accumulation, each tensor at its own scale from its current amax ("current
// scaling", torchtitan's tensorwise recipe; no amax history, so there is no scaling state to checkpoint
// and a resume is exact). A tensor is quantized to codes at the power-of-two scale that maps its amax
// inside the format (kernels/fp8_math.hpp) by fp8_quantize, row by row or transposed (both GEMM operands
// must have the reduced dimension contiguous: the input gradient takes the weight transposed, the weight
// gradient the output gradient and the input transposed), and gemm_fp8 multiplies two such operands
// (cuBLASLt's fp8 matmul on a GPU; decoded values and sgemm on the host, the same sums in another order).
// The bias gradient is the column sums of the unrounded output gradient, as in Transformer Engine.
// A tensor's amax is that of the whole tensor of one rank's run: a piece split over tensor parallelism
// (row-parallel inputs, column-parallel output gradients, every weight) or, for a micro-batch's rows, over
// context parallelism is reduced to the maximum over its group first, which is exact, so every layout
// quantizes like one rank. The operands go to buffers of the activation scratch (Scratch::fp8_*).
#pragma once
#include <cstdint>

#include "comm/communicator.hpp"
#include "kernels/fp8_math.hpp"
#include "kernels/kernels.hpp"
#include "model/linear_output.hpp"
#include "model/weight_grads.hpp"
#include "parallel/tensor_parallel.hpp"
#include "plan/activation_layout.hpp"

namespace dtrain {

template <typename T>
class LinearGemms {
 public:
  // fp8 GEMMs where the scratch has fp8 buffers (activation_layout: precision fp8), else T's kernels.
  LinearGemms(const kernels::KernelTable<T>& k, WeightGrads<T>& wg, const Scratch<T>& sc, const TensorParallel* tp, Communicator* cp)
      : k_(k), wg_(wg), sc_(sc), tp_(tp), cp_(cp && cp->size() > 1 ? cp : nullptr) {}
  bool fp8() const { return sc_.fp8_amax != nullptr; }

  // out (=) x (N,IC) w (OC,IC)^T + bias: rows of T, or fp32 partial sums over tp.
  void forward(LinearOutput<T> out, const T* x, const T* w, const T* bias, long N, int IC, int OC) {
    if (!fp8()) return linear_forward(k_, out, x, w, bias, N, IC, OC);
    quantize_forward(x, w, N, IC, OC);
    if (out.partial)
      k_.gemm_fp8_wide(out.partial, 0, sc_.fp8_x, kE4m3, amax(kX), sc_.fp8_w, kE4m3, amax(kW), bias, N, OC, IC);
    else
      k_.gemm_fp8(out.rows, sc_.fp8_x, kE4m3, amax(kX), sc_.fp8_w, kE4m3, amax(kW), bias, N, OC, IC);
  }
  // pre (=) x w^T + bias and act (=) gelu(pre): the MLP's first layer (in one pass where the backend
  // fuses them, outside fp8).
  void forward_gelu(T* act, T* pre, const T* x, const T* w, const T* bias, long N, int IC, int OC) {
    if (!fp8()) return k_.matmul_forward_gelu(act, pre, x, w, bias, N, IC, OC);
    forward({pre, nullptr}, x, w, bias, N, IC, OC);
    k_.gelu_forward(act, pre, N * OC);
  }
  // dinp (=) dy (N,OC) w, dweight += dy^T x, dbias += the column sums of dy.
  void backward(LinearOutput<T> dinp, float* dweight, float* dbias, const T* dy, const T* x, const T* w, long N, int IC, int OC) {
    if (!fp8()) return linear_backward(wg_, dinp, dweight, dbias, dy, x, w, N, IC, OC);
    input_grad_fp8(dinp.partial, dinp.rows, dbias, dy, w, N, IC, OC);
    weight_grad_fp8(dweight, dy, x, N, IC, OC);
  }
  // The backward of a layer whose input is act = gelu(pre) (the MLP's second layer): dpre (=) (dy w) *
  // gelu'(pre), dact (N,IC) scratch; dweight += dy^T act; dbias += the column sums of dy.
  void backward_gelu(T* dpre, T* dact, float* dweight, float* dbias, const T* dy, const T* act, const T* w, const T* pre, long N, int IC,
                     int OC) {
    if (!fp8()) return wg_.matmul_gelu(dpre, dact, dweight, dbias, dy, act, w, pre, N, IC, OC);
    input_grad_fp8(nullptr, dact, dbias, dy, w, N, IC, OC);
    k_.gelu_backward(dpre, pre, dact, N * IC);
    weight_grad_fp8(dweight, dy, act, N, IC, OC);
  }

  // The amax of a tensor of n elements as the GEMMs use it (in device memory): reduced over tensor
  // parallelism, and with over_rows (a micro-batch's rows) over context parallelism.
  enum Operand { kX, kW, kDy };
  const float* reduced_amax(Operand which, const T* x, long n, bool over_rows) {
    float* a = sc_.fp8_amax + which;
    k_.fp8_amax(a, x, n);
    if (tp_) tp_->all_reduce_max(a, 1);
    if (over_rows && cp_) cp_->all_reduce(a, 1, DType::f32, ReduceOp::max, CommLabel{"all-reduce fp8 amax"});
    return a;
  }

 private:
  static constexpr int kE4m3 = static_cast<int>(kernels::Fp8Format::e4m3), kE5m2 = static_cast<int>(kernels::Fp8Format::e5m2);
  const float* amax(Operand which) const { return sc_.fp8_amax + which; }

  void quantize_forward(const T* x, const T* w, long N, int IC, int OC) {
    k_.fp8_quantize(sc_.fp8_x, x, reduced_amax(kX, x, N * IC, true), N, IC, kE4m3, 0);
    k_.fp8_quantize(sc_.fp8_w, w, reduced_amax(kW, w, static_cast<long>(OC) * IC, false), OC, IC, kE4m3, 0);
  }
  // dinp (N,IC) = dy w as fp32 partials (wide) or rows: dy (E5M2) times w^T (E4M3, (IC,OC)); dbias from
  // the unrounded dy (in B of a split backward, as the norms' weight gradients).
  void input_grad_fp8(float* wide, T* rows, float* dbias, const T* dy, const T* w, long N, int IC, int OC) {
    if (dbias) k_.matmul_backward(nullptr, nullptr, dbias, dy, nullptr, nullptr, N, 0, OC);
    k_.fp8_quantize(sc_.fp8_dy, dy, reduced_amax(kDy, dy, N * OC, true), N, OC, kE5m2, 0);
    k_.fp8_quantize(sc_.fp8_w_t, w, reduced_amax(kW, w, static_cast<long>(OC) * IC, false), OC, IC, kE4m3, 1);
    if (wide)
      k_.gemm_fp8_wide(wide, 0, sc_.fp8_dy, kE5m2, amax(kDy), sc_.fp8_w_t, kE4m3, amax(kW), nullptr, N, IC, OC);
    else
      k_.gemm_fp8(rows, sc_.fp8_dy, kE5m2, amax(kDy), sc_.fp8_w_t, kE4m3, amax(kW), nullptr, N, IC, OC);
  }
  // dweight (OC,IC) += dy^T x: dy^T (E5M2, (OC,N)) times x^T (E4M3, (IC,N)); now, or at W in a split
  // backward (WeightGrads keeps dy and x), where dy's amax is taken again (B's has been overwritten).
  void weight_grad_fp8(float* dweight, const T* dy, const T* x, long N, int IC, int OC) {
    if (!dweight) return;  // a frozen weight (training.freeze)
    wg_.weight(dy, N * OC, x, N * IC, [this, dweight, N, IC, OC](const T* d, const T* in, bool deferred) {
      const float* dy_amax = deferred ? reduced_amax(kDy, d, N * OC, true) : amax(kDy);
      k_.fp8_quantize(sc_.fp8_dy_t, d, dy_amax, N, OC, kE5m2, 1);
      k_.fp8_quantize(sc_.fp8_x_t, in, reduced_amax(kX, in, N * IC, true), N, IC, kE4m3, 1);
      k_.gemm_fp8_wide(dweight, 1, sc_.fp8_dy_t, kE5m2, amax(kDy), sc_.fp8_x_t, kE4m3, amax(kX), nullptr, OC, IC, N);
    });
  }

  const kernels::KernelTable<T>& k_;
  WeightGrads<T>& wg_;
  const Scratch<T>& sc_;
  const TensorParallel* tp_;
  Communicator* cp_;
};

}  // namespace dtrain
