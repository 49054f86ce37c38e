// MoeLayer<T>: router, routing, experts and combine of a MoE block (forward and backward).
#include "model/moe_layer.hpp"

#include <type_traits>

#include "common/storage_type.hpp"
#include "model/moe_routing.hpp"

namespace dtrain {

template <typename T>
MoeLayer<T>::MoeLayer(const RankPlan& plan, kernels::Backend backend, const TensorParallel* tp, Communicator* cp,
                      ExpertDispatch& dispatch, Device& device, MoeStats& stats)
    : k_(kernels::kernel_table<T>(backend)),
      kf_(kernels::kernel_table<float>(backend)),
      own_wg_(k_),
      wg_(&own_wg_),
      tp_(tp),
      cp_(cp && cp->size() > 1 ? cp : nullptr),
      reports_aux_(plan.coords.cp == 0),
      dispatch_(dispatch),
      device_(device),
      stats_(stats),
      d_(plan.activations.dims),
      swiglu_(plan.shape.swiglu),
      bias_owner_(plan.coords.tp == 0),
      aux_coeff_(plan.shape.moe_aux_coeff),
      renormalize_(plan.shape.moe_renormalize),
      capacity_(plan.shape.capacity_factor > 0 ? expert_capacity(plan.shape.capacity_factor, d_.N(), d_.K, d_.E) : -1) {
  stats_.tokens.assign(static_cast<std::size_t>(plan.shape.num_layers) * static_cast<std::size_t>(d_.E), 0.0);
}

template <typename T>
const float* MoeLayer<T>::router_input(const T* x, long N, Scratch<T>& sc) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    k_.widen(sc.moe.x32, x, N * d_.C);
    return sc.moe.x32;
  }
}

template <typename T>
const float* MoeLayer<T>::router_weight(const T* w, Scratch<T>& sc) {
  if constexpr (std::is_same_v<T, float>) {
    return w;
  } else {
    k_.widen(sc.moe.w32, w, static_cast<long>(d_.E) * d_.C);
    return sc.moe.w32;
  }
}

template <typename T>
void MoeLayer<T>::forward(float* out, const MoeParams<T>& p, const T* x, long N, MoeActs<T>& a, Scratch<T>& sc, int layer,
                          bool record) {
  const int E = d_.E, K = d_.K, C = d_.C;
  // Router, fp32: every tp rank computes the same logits from the same full rows.
  kf_.matmul_forward(sc.moe.logits, router_input(x, N, sc), router_weight(p.router_w, sc), nullptr, N, C, E);
  kf_.moe_router_forward(a.probs, a.idx, a.w, sc.moe.logits, N, E, K);
  // Routing on the host (a few ints and floats per token).
  std::vector<int> idx(static_cast<std::size_t>(N * K));
  std::vector<float> w(idx.size()), probs(static_cast<std::size_t>(N * E));
  device_.copy(idx.data(), a.idx, sizeof(int) * idx.size());
  device_.copy(w.data(), a.w, sizeof(float) * w.size());
  device_.copy(probs.data(), a.probs, sizeof(float) * probs.size());
  Routed& kept = routed_[a.src];
  if (renormalize_) {  // the weights the combine and the capacity's ranking use, back to the device
    kept.sums.resize(static_cast<std::size_t>(N));
    renormalize_top_k(w.data(), kept.sums.data(), N, K);
    to_device(a.w, w);
    kept.weights = w;
  }
  const MoeRouting r = route_tokens(idx.data(), w.data(), N, E, K, capacity_);
  // Context parallelism splits a micro-batch's tokens over the cp group: the load-balancing loss is
  // the whole micro-batch's, from the sums of every cp rank (each cp rank then holds the same loss;
  // cp rank 0 reports it). Without the loss there is nothing to sum.
  LoadBalanceSums sums(probs.data(), r.counts, N, E);
  if (cp_ && aux_coeff_ > 0) {
    std::vector<double> all(sums.probs);
    all.insert(all.end(), sums.counts.begin(), sums.counts.end());
    all.push_back(static_cast<double>(sums.tokens));
    cp_->all_reduce(all.data(), all.size(), DType::f64, ReduceOp::sum, {"allreduce (MoE load-balancing sums)"});
    std::copy(all.begin(), all.begin() + E, sums.probs.begin());
    std::copy(all.begin() + E, all.begin() + 2 * E, sums.counts.begin());
    sums.tokens = static_cast<long>(all.back());
  }
  kept.tokens = sums.tokens;
  const double aux = load_balancing_loss(sums, K, aux_coeff_, aux_coeff_ > 0 ? &kept.daux : nullptr);
  if (record) {
    if (reports_aux_) stats_.aux_loss += aux;
    for (int e = 0; e < E; ++e) stats_.tokens[static_cast<std::size_t>(layer) * E + e] += static_cast<double>(r.counts[e]);
  }
  to_device(a.pos, r.pos);
  to_device(a.src, r.src);
  to_device(a.row_w, r.row_w);
  kept.layout = dispatch_.plan(r.rows);
  // Dispatch: token rows into expert-major rows, then to the experts that compute them (with ep = 1 the
  // expert side is the token side), and the outputs back into a.y, kept for backward (a.out itself
  // when ep = 1).
  k_.moe_gather_rows(a.xin, x, a.src, nullptr, r.total_rows(), C);
  const T* xe = static_cast<const T*>(dispatch_.to_experts(kept.layout, a.xin, sc.moe.xe, C, dtype_of<T>()));
  expert_forward(p, xe, a, kept.layout.local_rows());
  dispatch_.from_experts(kept.layout, a.out, a.y, C, DType::f32);
  kf_.moe_combine(out, a.y, a.pos, a.w, N, K, C, false);
}

template <typename T>
void MoeLayer<T>::expert_forward(const MoeParams<T>& p, const T* xe, MoeActs<T>& a, const std::vector<long>& rows) {
  const int C = d_.C, Fe = d_.Fe, He = d_.He();
  long o = 0;  // first row of expert e
  for (std::size_t e = 0; e < rows.size(); o += rows[e], ++e) {
    const long n = rows[e];
    if (n == 0) continue;
    const long le = static_cast<long>(e);
    T* h = a.fch + o * He;   // (n,He)
    T* act = a.act + o * Fe;  // (n,Fe)
    k_.matmul_forward(h, xe + o * C, p.fc_w + le * He * C, p.fc_b ? p.fc_b + le * He : nullptr, n, C, He);
    if (swiglu_)
      k_.swiglu_forward(act, h, n, Fe);
    else
      k_.gelu_forward(act, h, n * Fe);
    const T* bias = bias_owner_ && p.fcproj_b ? p.fcproj_b + le * C : nullptr;  // added once over tp
    k_.matmul_forward_wide(a.out + o * C, act, p.fcproj_w + le * C * Fe, bias, n, Fe, C);
  }
}

template <typename T>
void MoeLayer<T>::backward(float* dx, const MoeParams<T>& p, const MoeParams<float>& g, const T* x, const T* dy, MoeActs<T>& a,
                           Scratch<T>& sc, float loss_weight) {
  const long N = d_.N();
  const int E = d_.E, K = d_.K, C = d_.C;
  const Routed& kept = routed_.at(a.src);
  const long R = kept.layout.token_rows();
  // Routing weights: dw = dot(dy, expert output), the output being the sum of the tp-partial outputs.
  k_.moe_row_dots(sc.moe.dw, dy, a.y, a.pos, N, K, C);
  if (tp_) tp_->all_reduce(sc.moe.dw, N * K);
  if (renormalize_) {  // through the renormalisation, on the host that keeps its sums
    std::vector<float> dw(static_cast<std::size_t>(N * K));
    device_.copy(dw.data(), sc.moe.dw, sizeof(float) * dw.size());
    renormalized_weight_grad(dw.data(), kept.weights.data(), kept.sums.data(), N, K);
    to_device(sc.moe.dw, dw);
  }
  // Experts: the output gradient of each row is its routing weight x dy of its token.
  k_.moe_gather_rows(sc.moe.drows, dy, a.src, a.row_w, R, C);
  const T* de = static_cast<const T*>(dispatch_.to_experts(kept.layout, sc.moe.drows, sc.moe.de, C, dtype_of<T>()));
  const T* xe = static_cast<const T*>(dispatch_.to_experts(kept.layout, a.xin, sc.moe.xe, C, dtype_of<T>()));
  expert_backward(p, g, xe, de, a, sc, kept.layout.local_rows());
  const float* dxt = static_cast<const float*>(dispatch_.from_experts(kept.layout, sc.moe.dxin, sc.moe.dxt, C, DType::f32));
  // Router: softmax backward of the routing weights' and the load-balancing loss's gradients. The loss
  // of a micro-batch of N tokens enters the objective as N x loss_weight x aux (1 / micro-batches).
  const float* daux = nullptr;
  if (!kept.daux.empty()) {
    std::vector<float> scaled(kept.daux);
    for (float& v : scaled) v *= static_cast<float>(kept.tokens) * loss_weight;
    to_device(sc.moe.daux, scaled);
    daux = sc.moe.daux;
  }
  float* dlogits = sc.moe.logits;
  kf_.moe_router_backward(dlogits, a.probs, a.idx, sc.moe.dw, daux, N, E, K);
  // dW_r on every rank (the same values); the router's share of dx only on tp rank 0, then the experts'.
  wg_->matmul(kf_, bias_owner_ ? dx : nullptr, g.router_w, nullptr, dlogits, router_input(x, N, sc), router_weight(p.router_w, sc),
                      N, C, E);
  kf_.moe_combine(dx, dxt, a.pos, nullptr, N, K, C, bias_owner_);
}

template <typename T>
void MoeLayer<T>::expert_backward(const MoeParams<T>& p, const MoeParams<float>& g, const T* xe, const T* de, MoeActs<T>& a,
                                  Scratch<T>& sc, const std::vector<long>& rows) {
  const int C = d_.C, Fe = d_.Fe, He = d_.He();
  long o = 0;
  for (std::size_t e = 0; e < rows.size(); o += rows[e], ++e) {
    const long n = rows[e];
    if (n == 0) continue;
    const long le = static_cast<long>(e);
    T* dact = sc.moe.dact + o * Fe;  // (n,Fe)
    T* dh = sc.moe.dfch + o * He;    // (n,He)
    // Frozen expert tensors (training.freeze) have no gradient: null views stay null.
    wg_->matmul(dact, g.fcproj_w ? g.fcproj_w + le * C * Fe : nullptr, g.fcproj_b ? g.fcproj_b + le * C : nullptr, de + o * C, a.act + o * Fe,
                       p.fcproj_w + le * C * Fe, n, Fe, C);
    if (swiglu_)
      k_.swiglu_backward(dh, a.fch + o * He, dact, n, Fe);
    else
      k_.gelu_backward(dh, a.fch + o * He, dact, n * Fe);
    wg_->matmul_wide(sc.moe.dxin + o * C, g.fc_w ? g.fc_w + le * He * C : nullptr, g.fc_b ? g.fc_b + le * He : nullptr, dh, xe + o * C,
                            p.fc_w + le * He * C, n, C, He);
  }
}

template class MoeLayer<float>;
template class MoeLayer<bf16>;
template class MoeLayer<fp16>;

}  // namespace dtrain
