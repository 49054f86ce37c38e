// DenseMlp<T>: a dense block's MLP, forward and backward of one micro-batch: fc (column-parallel) ->
// GELU or SwiGLU -> fcproj (row-parallel) of the block's second norm output, the output as fp32 partial
// sums over tp (the block reduces and rounds them once). With selective recomputation the activation
// is recomputed from fch in backward. Weight gradients go through WeightGrads (split backward). MoE
// blocks use MoeLayer instead.
#pragma once
#include "kernels/kernels.hpp"
#include "model/fp8_operands.hpp"
#include "model/linear_output.hpp"
#include "model/param_views.hpp"

namespace dtrain {

template <typename T>
class DenseMlp {
 public:
  DenseMlp(const kernels::KernelTable<T>& k, WeightGrads<T>& wg, Fp8Operands<T>& fp8, const ActivationDims& d, bool swiglu, bool bias_owner,
           bool selective)
      : k_(k), wg_(wg), fp8_(fp8), d_(d), swiglu_(swiglu), bias_owner_(bias_owner), selective_(selective) {}

  // out (N,C) (=): fcproj(act(fc(a.ln2))), the bias added on tp rank 0 (partial sums over tp, or rows).
  void forward(LinearOutput<T> out, const BlockParams<T>& p, BlockActs<T>& a) const {
    const auto fc = fp8_.forward(a.ln2, p.fc_w, d_.N(), d_.C, d_.Hl());
    if (swiglu_ || selective_) {  // selective: the backward recomputes the activation from the stored fch, so the forward does too
      k_.matmul_forward(a.fch, fc.x, fc.w, p.fc_b, d_.N(), d_.C, d_.Hl());
      activation(a);
    } else {  // fch and gelu(fch) in one pass where the backend can (cuBLASLt's epilogue, from the unrounded fch)
      k_.matmul_forward_gelu(a.fch_gelu, a.fch, fc.x, fc.w, p.fc_b, d_.N(), d_.C, d_.Hl());
    }
    const auto proj = fp8_.forward(a.fch_gelu, p.fcproj_w, d_.N(), d_.Fl, d_.C);
    linear_forward(k_, out, proj.x, proj.w, bias_owner_ ? p.fcproj_b : nullptr, d_.N(), d_.Fl, d_.C);
  }

  // dln (N,C) (=): the gradient of a.ln2 (partial sums over tp, or rows); dy (N,C): the block output's
  // gradient, full rows.
  void backward(LinearOutput<T> dln, const BlockParams<T>& p, const BlockParams<float>& g, BlockActs<T>& a, const T* dy,
                Scratch<T>& sc) const {
    const long N = d_.N();
    if (selective_) activation(a);
    const auto proj = fp8_.backward(dy, a.fch_gelu, p.fcproj_w, g.fcproj_b, N, d_.Fl, d_.C);
    if (swiglu_) {
      wg_.matmul(sc.dfch2, g.fcproj_w, proj.dbias, proj.dy, proj.x, proj.w, N, d_.Fl, d_.C);
      k_.swiglu_backward(sc.dfch, a.fch, sc.dfch2, N, d_.Fl);
    } else {  // through the GELU in the same pass where the backend can (sc.dfch2 is its scratch otherwise)
      wg_.matmul_gelu(sc.dfch, sc.dfch2, g.fcproj_w, proj.dbias, proj.dy, proj.x, proj.w, a.fch, N, d_.Fl, d_.C);
    }
    const auto fc = fp8_.backward(sc.dfch, a.ln2, p.fc_w, g.fc_b, N, d_.C, d_.Hl());
    linear_backward(wg_, dln, g.fc_w, fc.dbias, fc.dy, fc.x, fc.w, N, d_.C, d_.Hl());
  }

 private:
  void activation(BlockActs<T>& a) const {  // fch_gelu from fch
    if (swiglu_)
      k_.swiglu_forward(a.fch_gelu, a.fch, d_.N(), d_.Fl);
    else
      k_.gelu_forward(a.fch_gelu, a.fch, d_.N() * d_.Fl);
  }

  const kernels::KernelTable<T>& k_;
  WeightGrads<T>& wg_;
  Fp8Operands<T>& fp8_;
  ActivationDims d_;
  bool swiglu_, bias_owner_, selective_;
};

}  // namespace dtrain
