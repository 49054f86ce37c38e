// DenseMlp<T>: a dense block's MLP, forward and backward of one micro-batch: fc (column-parallel) ->
// GELU or SwiGLU -> fcproj (row-parallel) of the block's second norm output, the output as fp32 partial
// sums over tp (the block reduces and rounds them once). With selective recomputation the activation
// is recomputed from fch in backward. The GEMMs go through LinearGemms (fp8, split backward). MoE
// blocks use MoeLayer instead.
#pragma once
#include "kernels/kernels.hpp"
#include "model/linear_gemms.hpp"
#include "model/param_views.hpp"

namespace dtrain {

template <typename T>
class DenseMlp {
 public:
  DenseMlp(const kernels::KernelTable<T>& k, LinearGemms<T>& linear, const ActivationDims& d, bool swiglu, bool bias_owner, bool selective)
      : k_(k), linear_(linear), d_(d), swiglu_(swiglu), bias_owner_(bias_owner), selective_(selective) {}

  // out (N,C) (=): fcproj(act(fc(a.ln2))) of N rows (the micro-batch's, or fewer: a decode pass), the
  // bias added on tp rank 0 (partial sums over tp, or rows).
  void forward(LinearOutput<T> out, const BlockParams<T>& p, BlockActs<T>& a, long N) const {
    if (swiglu_ || selective_) {  // selective: the backward recomputes the activation from the stored fch, so the forward does too
      linear_.forward({a.fch, nullptr}, a.ln2, p.fc_w, p.fc_b, N, d_.C, d_.Hl());
      activation(a, N);
    } else {  // fch and gelu(fch) in one pass where the backend can (cuBLASLt's epilogue, from the unrounded fch)
      linear_.forward_gelu(a.fch_gelu, a.fch, a.ln2, p.fc_w, p.fc_b, N, d_.C, d_.Hl());
    }
    linear_.forward(out, a.fch_gelu, p.fcproj_w, bias_owner_ ? p.fcproj_b : nullptr, N, d_.Fl, d_.C);
  }

  // dln (N,C) (=): the gradient of a.ln2 (partial sums over tp, or rows); dy (N,C): the block output's
  // gradient, full rows.
  void backward(LinearOutput<T> dln, const BlockParams<T>& p, const BlockParams<float>& g, BlockActs<T>& a, const T* dy,
                Scratch<T>& sc) const {
    const long N = d_.N();
    if (selective_) activation(a, N);
    if (swiglu_) {
      linear_.backward({sc.dfch2, nullptr}, g.fcproj_w, g.fcproj_b, dy, a.fch_gelu, p.fcproj_w, N, d_.Fl, d_.C);
      k_.swiglu_backward(sc.dfch, a.fch, sc.dfch2, N, d_.Fl);
    } else {  // through the GELU in the same pass where the backend can (sc.dfch2 is its scratch otherwise)
      linear_.backward_gelu(sc.dfch, sc.dfch2, g.fcproj_w, g.fcproj_b, dy, a.fch_gelu, p.fcproj_w, a.fch, N, d_.Fl, d_.C);
    }
    linear_.backward(dln, g.fc_w, g.fc_b, sc.dfch, a.ln2, p.fc_w, N, d_.C, d_.Hl());
  }

 private:
  void activation(BlockActs<T>& a, long N) const {  // fch_gelu from fch, N rows
    if (swiglu_)
      k_.swiglu_forward(a.fch_gelu, a.fch, N, d_.Fl);
    else
      k_.gelu_forward(a.fch_gelu, a.fch, N * d_.Fl);
  }

  const kernels::KernelTable<T>& k_;
  LinearGemms<T>& linear_;
  ActivationDims d_;
  bool swiglu_, bias_owner_, selective_;
};

}  // namespace dtrain
