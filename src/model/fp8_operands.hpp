// Fp8Operands<T>: the fp8 arithmetic of system.precision = fp8, for the linear layers of the blocks (the
// QKV product, the attention projection, the dense MLP's two layers; MoE experts, the router and the LM
// head stay bf16). A GEMM of such a layer multiplies operands rounded to fp8 with fp32 accumulation, as
// Transformer Engine's HYBRID format does: the input and the weight in E4M3, the output gradient in E5M2
// (its wider range), each tensor at its own scale from its current amax ("current scaling", torchtitan's
// tensorwise recipe; no amax history, so there is no scaling state to checkpoint and a resume is exact).
// The scale is the power of two that maps the amax inside the format (kernels/fp8_math.hpp), so the
// rounded operand, (fp8 code) / scale, is exact in bf16: the bf16 GEMM on it computes what an fp8 GEMM
// with the scales folded into its alpha computes, up to the order of the sums. That is how both backends
// emulate fp8 for now. The bias gradients are the column sums of the unrounded output gradient, as in
// Transformer Engine.
// A tensor's amax is that of the whole tensor of one rank's run: a piece split over tensor parallelism
// (row-parallel inputs, column-parallel output gradients, every weight) or over context parallelism (a
// micro-batch's rows) is reduced to the maximum over its group first, which is exact, so every layout
// rounds like one rank.
#pragma once
#include "comm/communicator.hpp"
#include "kernels/fp8_math.hpp"
#include "kernels/kernels.hpp"
#include "parallel/tensor_parallel.hpp"
#include "plan/activation_layout.hpp"

namespace dtrain {

template <typename T>
class Fp8Operands {
 public:
  // Off (every operand returned as it is) unless the scratch has fp8 buffers (activation_layout).
  Fp8Operands(const kernels::KernelTable<T>& k, const Scratch<T>& sc, const TensorParallel* tp, Communicator* cp)
      : k_(k), sc_(sc), tp_(tp), cp_(cp && cp->size() > 1 ? cp : nullptr) {}
  bool on() const { return sc_.fp8_amax != nullptr; }

  // The operands of a linear layer out (N,OC) = x (N,IC) w (OC,IC)^T: x and w in E4M3.
  struct Forward {
    const T* x;
    const T* w;
  };
  Forward forward(const T* x, const T* w, long N, int IC, int OC) {
    if (!on()) return {x, w};
    return {round(sc_.fp8_input, x, N * IC, kernels::Fp8Format::e4m3, true),
            round(sc_.fp8_weight, w, static_cast<long>(OC) * IC, kernels::Fp8Format::e4m3, false)};
  }
  // The operands of its backward from dy (N,OC): dy in E5M2, x and w in E4M3 (the forward's values), and
  // the bias gradient the GEMM adds: in fp8 runs none, this call adds dbias the column sums of the
  // unrounded dy first.
  struct Backward {
    const T* dy;
    const T* x;
    const T* w;
    float* dbias;
  };
  Backward backward(const T* dy, const T* x, const T* w, float* dbias, long N, int IC, int OC) {
    if (!on()) return {dy, x, w, dbias};
    if (dbias) k_.matmul_backward(nullptr, nullptr, dbias, dy, nullptr, nullptr, N, 0, OC);
    const Forward f = forward(x, w, N, IC, OC);
    return {round(sc_.fp8_grad, dy, N * OC, kernels::Fp8Format::e5m2, true), f.x, f.w, nullptr};
  }

 private:
  // x (n) rounded into `out` at the scale of the amax of its whole tensor: over tensor parallelism (a
  // row-parallel input, a column-parallel output gradient, a weight; the maximum of equal copies
  // elsewhere), and for a micro-batch's rows (over_rows) over context parallelism.
  const T* round(T* out, const T* x, long n, kernels::Fp8Format f, bool over_rows) {
    k_.fp8_amax(sc_.fp8_amax, x, n);
    if (tp_) tp_->all_reduce_max(sc_.fp8_amax, 1);
    if (over_rows && cp_) cp_->all_reduce(sc_.fp8_amax, 1, DType::f32, ReduceOp::max, CommLabel{"all-reduce fp8 amax"});
    k_.fp8_round(out, x, sc_.fp8_amax, n, static_cast<int>(f));
    return out;
  }

  const kernels::KernelTable<T>& k_;
  const Scratch<T>& sc_;
  const TensorParallel* tp_;
  Communicator* cp_;
};

}  // namespace dtrain
