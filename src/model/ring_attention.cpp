// RingAttention<T>: the cp ring's steps around attention_block_forward / attention_block_backward.
#include "model/ring_attention.hpp"

#include <limits>

namespace dtrain {

template <typename T>
template <typename F>
void RingAttention<T>::visible_pairs(int step, int window, F f) const {
  const int n = d_.cp, source = (d_.cp_rank - step + n) % n;
  for (int hq = 0; hq < 2; ++hq)
    for (int hk = 0; hk < 2; ++hk) {
      const int q_chunk = ActivationDims::zigzag_chunk(n, d_.cp_rank, hq);
      const int kv_chunk = ActivationDims::zigzag_chunk(n, source, hk);
      const int Tc = d_.T / 2, q_pos = q_chunk * Tc, k_pos = kv_chunk * Tc;
      const bool before_window = window > 0 && k_pos + Tc - 1 < q_pos - window + 1;  // even the first row's window starts later
      if (kv_chunk <= q_chunk && !before_window) f(hq, hk, q_pos, k_pos);
    }
}

template <typename T>
void RingAttention<T>::forward(T* atty, float* lse, const T* qkv, kernels::KeyVisibility visible, Scratch<T>& sc) {
  const int n = d_.cp, next = (d_.cp_rank + 1) % n, prev = (d_.cp_rank + n - 1) % n;
  const int W = d_.QKVl(), KW = kv_width(), Cl = d_.Cl, Tc = d_.T / 2, NH = d_.NHl;
  const long N = d_.N();
  k_.copy_columns(sc.ring_kv[0], qkv, N, W, Cl, KW);
  k_.fill(sc.ring_acc, 0.0f, N * Cl);
  k_.fill(lse, -std::numeric_limits<float>::infinity(), N * NH);
  for (int step = 0; step < n; ++step) {
    const T* kv = sc.ring_kv[step % 2];
    // The next rank's key/values arrive while this step computes.
    CommRequest arriving;
    if (step + 1 < n)
      arriving = cp_.exchange(kv, sc.ring_kv[(step + 1) % 2], static_cast<std::size_t>(N) * KW, dtype_of<T>(), next, prev, 0,
                              {"ring attention K/V"}, Completion::later);
    for (int b = 0; b < d_.B; ++b)
      visible_pairs(step, visible.window, [&](int hq, int hk, int q_pos, int k_pos) {
        const long q_row = static_cast<long>(b) * d_.T + hq * Tc, kv_row = static_cast<long>(b) * d_.T + hk * Tc;
        k_.attention_block_forward(sc.ring_acc + q_row * Cl, lse + q_row * NH, sc.dtt, qkv + q_row * W, W, kv + kv_row * KW, KW, Tc,
                                   Tc, NH, d_.NKVl, d_.HD(), q_pos, k_pos, visible.from_row(q_row));
      });
    arriving.wait();
  }
  k_.narrow(atty, sc.ring_acc, N * Cl);
}

template <typename T>
void RingAttention<T>::backward(T* dqkv, const T* datty, const T* atty, const float* lse, const T* qkv, kernels::KeyVisibility visible,
                                Scratch<T>& sc) {
  const int n = d_.cp, next = (d_.cp_rank + 1) % n, prev = (d_.cp_rank + n - 1) % n;
  const int W = d_.QKVl(), KW = kv_width(), Cl = d_.Cl, Tc = d_.T / 2, NH = d_.NHl;
  const long N = d_.N();
  const std::size_t kv_count = static_cast<std::size_t>(N) * KW;
  k_.copy_columns(sc.ring_kv[0], qkv, N, W, Cl, KW);
  k_.fill(sc.ring_acc, 0.0f, N * Cl);  // dq
  k_.fill(sc.ring_dkv[0], 0.0f, static_cast<long>(kv_count));
  for (int step = 0; step < n; ++step) {
    const T* kv = sc.ring_kv[step % 2];
    float* dkv = sc.ring_dkv[step % 2];
    CommRequest arriving;
    if (step + 1 < n)
      arriving = cp_.exchange(kv, sc.ring_kv[(step + 1) % 2], kv_count, dtype_of<T>(), next, prev, 0, {"ring attention K/V"},
                              Completion::later);
    for (int b = 0; b < d_.B; ++b)
      visible_pairs(step, visible.window, [&](int hq, int hk, int q_pos, int k_pos) {
        const long q_row = static_cast<long>(b) * d_.T + hq * Tc, kv_row = static_cast<long>(b) * d_.T + hk * Tc;
        k_.attention_block_backward(sc.ring_acc + q_row * Cl, dkv + kv_row * KW, KW, sc.dtt, datty + q_row * Cl, atty + q_row * Cl,
                                    lse + q_row * NH, qkv + q_row * W, W, kv + kv_row * KW, KW, Tc, Tc, NH, d_.NKVl, d_.HD(), q_pos, k_pos,
                                    visible.from_row(q_row));
      });
    arriving.wait();
    // The key/value gradients follow their rows to the next rank; after the last step they are home.
    cp_.exchange(dkv, sc.ring_dkv[(step + 1) % 2], kv_count, DType::f32, next, prev, 1, {"ring attention dK/dV"});
  }
  k_.narrow_columns(dqkv, sc.ring_acc, N, W, 0, Cl);
  k_.narrow_columns(dqkv, sc.ring_dkv[n % 2], N, W, Cl, KW);
}

template class RingAttention<float>;
template class RingAttention<bf16>;
template class RingAttention<fp16>;

}  // namespace dtrain
