// MoeLayer<T>: the mixture-of-experts MLP of a block, forward and backward of one micro-batch, in place
// of the dense MLP. Input: the block's second norm output x (N,C), full rows on every tensor-parallel
// rank. Router in fp32: logits = x W_r^T (E), softmax, the top-k probabilities (ties: the lower expert
// index) are the routing weights, or those renormalised to sum to 1 (model.moe_router_pre_softmax = false;
// on the host, which has them for routing). The host routes (model/moe_routing.hpp: expert-major
// rows, capacity dropping), ExpertDispatch moves the rows to the experts and back, each expert runs
// fc -> GELU/SwiGLU -> fcproj over its rows (a GEMM per expert), and the combine sums weight x expert
// output into the token's row. The experts are split over tp like the dense MLP, so the output is an
// fp32 partial sum over tp that the block reduces and rounds once.
// Backward: expert weights, the routing weights' gradient (dot(dy, expert output), the per-assignment
// dots summed over tp), through the softmax together with the load-balancing loss's gradient, the
// router weight's gradient (identical on every tp rank) and the router's share of dx (added once, on tp
// rank 0, to the tp-partial sum).
#pragma once
#include <unordered_map>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/weight_grads.hpp"
#include "parallel/expert_dispatch.hpp"
#include "parallel/tensor_parallel.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/device.hpp"

namespace dtrain {

// A MoE block's tensors on this rank (its E/ep local experts); biases null without add_bias_linear.
template <typename T>
struct MoeParams {
  T* router_w;  // (E,C)
  T* fc_w;      // (El,He,C)
  T* fc_b;      // (El,He)
  T* fcproj_w;  // (El,C,Fe)
  T* fcproj_b;  // (El,C)
};

// What the step line reports, summed over this rank's MoE layers and micro-batches since the last reset
// (every tensor-parallel rank holds the same values).
struct MoeStats {
  double aux_loss = 0.0;       // the load-balancing losses (before the objective's 1/micro-batches)
  std::vector<double> tokens;  // (num_layers, E) assignments per global layer and expert, before dropping
  void reset() {
    aux_loss = 0.0;
    std::fill(tokens.begin(), tokens.end(), 0.0);
  }
};

template <typename T>
class MoeLayer {
 public:
  // cp: the context-parallel group (the load-balancing loss sums over a micro-batch's tokens on all of it).
  MoeLayer(const RankPlan& plan, kernels::Backend backend, const TensorParallel* tp, Communicator* cp, ExpertDispatch& dispatch,
           Device& device, MoeStats& stats);
  // out (N,C): the combined expert outputs of x's N rows (the micro-batch's, or fewer: a decode pass),
  // fp32 partial sums over tp (=). record: count the layer in the statistics (false when a
  // recomputation reruns the forward, and when decoding).
  void forward(float* out, const MoeParams<T>& p, const T* x, long N, MoeActs<T>& a, Scratch<T>& sc, int layer, bool record);
  // dx (N,C) (=): the gradient of x, fp32 partial sum over tp; dy (N,C): the gradient of the block's
  // output, full rows. loss_weight: the LM loss's weight per token (the load-balancing loss of a
  // micro-batch of N tokens weighs N x loss_weight, so that it averages over micro-batches like the LM loss).
  void backward(float* dx, const MoeParams<T>& p, const MoeParams<float>& g, const T* x, const T* dy, MoeActs<T>& a,
                Scratch<T>& sc, float loss_weight);
  // The model's WeightGrads, through which the backward's weight gradients go (split or joined; without
  // one the layer's own, joined).
  void use_weight_grads(WeightGrads<T>& wg) { wg_ = &wg; }

 private:
  // The host's record of one routed micro-batch (by its activations), kept for the backward pass.
  struct Routed {
    ExpertLayout layout;
    std::vector<float> daux;  // (E) load-balancing gradient per expert, unscaled; empty without the loss
    long tokens = 0;          // the micro-batch's tokens (over the cp group)
    // Renormalised routing: the weights as renormalised and their sums before (N,K), (N); empty otherwise.
    std::vector<float> weights, sums;
  };
  // The router's fp32 input and weight: the tensors themselves in fp32 runs, widened copies in bf16 runs.
  const float* router_input(const T* x, long N, Scratch<T>& sc);  // x: N rows
  const float* router_weight(const T* w, Scratch<T>& sc);
  void expert_forward(const MoeParams<T>& p, const T* xe, MoeActs<T>& a, const std::vector<long>& rows);
  void expert_backward(const MoeParams<T>& p, const MoeParams<float>& g, const T* xe, const T* de, MoeActs<T>& a,
                       Scratch<T>& sc, const std::vector<long>& rows);
  template <typename U>
  void to_device(U* dst, const std::vector<U>& src) {
    if (!src.empty()) device_.copy(dst, src.data(), sizeof(U) * src.size());
  }

  const kernels::KernelTable<T>& k_;
  const kernels::KernelTable<float>& kf_;  // the fp32 router
  WeightGrads<T> own_wg_;
  WeightGrads<T>* wg_;
  const TensorParallel* tp_;
  Communicator* cp_;   // null without context parallelism
  bool reports_aux_;   // cp rank 0 adds the micro-batch's load-balancing loss to the statistics
  ExpertDispatch& dispatch_;
  Device& device_;
  MoeStats& stats_;
  ActivationDims d_;
  bool swiglu_, bias_owner_;
  double aux_coeff_;      // 0 = no load-balancing loss
  bool renormalize_;      // !model.moe_router_pre_softmax: the top-k weights renormalised to sum to 1
  long capacity_;         // per expert and micro-batch; -1 = dropless
  std::unordered_map<const void*, Routed> routed_;  // by the activations' MoeActs::src
};

}  // namespace dtrain
