// WeightGrads<T>: every call of a backward pass that adds a weight gradient through a GEMM or the
// embedding (each linear layer's weight and bias, the MoE router's and experts', the token and
// position tables) goes through here. Joined (1F1B, interleaved, AFAB) it is the kernel call itself.
// Split (the zero-bubble schedules' B and W): between begin(slot) and end(), a call runs its input-
// gradient half now (the same kernel with no weight gradient) and records its weight half; operands
// that would not live until then (scratch: output gradients, recomputed or gathered inputs) are
// copied into the slot's store, operands inside the slot's activations stay where they are (the
// slot is held until its W). run(slot) then makes the recorded calls in the recorded order, each
// the same GEMM on the same values as the joined call: B then W equals the joined backward bit for
// bit. Records are grouped by the layer being differentiated (layer()), so that W can announce each
// layer's gradients as complete.
// The norms' weight gradients stay in B: their kernels compute them in the same pass as the input
// gradient.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/kernels.hpp"

namespace dtrain {

template <typename T>
class WeightGrads {
 public:
  explicit WeightGrads(const kernels::KernelTable<T>& k) : k_(k) {}

  // Where slot `slot`'s kept operands go (store, bytes) and its activations ([begin, end): kept as they are).
  void add_slot(char* store, std::size_t bytes, const char* begin, const char* end) { slots_.push_back({store, bytes, begin, end, 0, {}}); }

  void begin(int slot) {
    current_ = &slots_.at(static_cast<std::size_t>(slot));
    if (!current_->records.empty()) fatal("internal error: a split backward in a slot whose weight gradients are still pending");
    current_->used = 0;
  }
  void end() { current_ = nullptr; }
  bool splitting() const { return current_ != nullptr; }
  // The layer (plan/buckets.hpp numbering) whose gradients the next calls add.
  void layer(int l) { layer_ = l; }

  // Makes slot's recorded weight-gradient calls; layer_phase(layer, true) before a layer's, (layer,
  // false) after. The slot's store is then free.
  void run(int slot, const std::function<void(int, bool)>& layer_phase) {
    Slot& s = slots_.at(static_cast<std::size_t>(slot));
    for (std::size_t i = 0; i < s.records.size(); ++i) {
      const int layer = s.records[i].layer;
      if (i == 0 || s.records[i - 1].layer != layer) layer_phase(layer, true);
      s.records[i].call();
      if (i + 1 == s.records.size() || s.records[i + 1].layer != layer) layer_phase(layer, false);
    }
    s.records.clear();
    s.used = 0;
  }

  // kernels' matmul_backward (S = T, or float for the router's fp32 GEMM).
  template <typename S>
  void matmul(const kernels::KernelTable<S>& k, S* dinp, float* dweight, float* dbias, const S* dout, const S* inp, const S* weight,
              long N, int IC, int OC) {
    if (!splitting()) return k.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
    if (dinp) k.matmul_backward(dinp, nullptr, nullptr, dout, inp, weight, N, IC, OC);
    defer_gemm(k, dweight, dbias, dout, inp, N, IC, OC);
  }
  void matmul(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, long N, int IC, int OC) {
    matmul(k_, dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
  }
  // kernels' matmul_backward_wide: the weight half is matmul_backward's (the same GEMM on both backends).
  void matmul_wide(float* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, long N, int IC, int OC) {
    if (!splitting()) return k_.matmul_backward_wide(dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
    k_.matmul_backward_wide(dinp, nullptr, nullptr, dout, inp, weight, N, IC, OC);
    defer_gemm(k_, dweight, dbias, dout, inp, N, IC, OC);
  }
  // kernels' matmul_backward_gelu: likewise.
  void matmul_gelu(T* dpre, T* dact, float* dweight, float* dbias, const T* dout, const T* act, const T* weight, const T* pre, long N,
                   int IC, int OC) {
    if (!splitting()) return k_.matmul_backward_gelu(dpre, dact, dweight, dbias, dout, act, weight, pre, N, IC, OC);
    k_.matmul_backward_gelu(dpre, dact, nullptr, nullptr, dout, act, weight, pre, N, IC, OC);
    defer_gemm(k_, dweight, dbias, dout, act, N, IC, OC);
  }
  // A weight half of its own (fp8's quantize-and-multiply, model/linear_gemms.hpp): weight_half(dout,
  // inp, false) now, or in a split backward recorded with dout's n_dout and inp's n_inp elements kept
  // (as defer_gemm keeps them) and made at W as weight_half(kept dout, kept inp, true).
  template <typename F>
  void weight(const T* dout, long n_dout, const T* inp, long n_inp, F weight_half) {
    if (!splitting()) return weight_half(dout, inp, false);
    const T* kept_dout = keep(k_, dout, n_dout);
    const T* kept_inp = keep(k_, inp, n_inp);
    record([=] { weight_half(kept_dout, kept_inp, true); });
  }
  // kernels' embedding_backward, all of it weight gradient (tokens and positions are the step's
  // batch, which outlives the step's actions).
  void embedding(float* dwte, float* dwpe, const T* dout, const int* tokens, const int* positions, int vocab_start, int B, int Tn, int C,
                 int V, int P) {
    if (!dwte && !dwpe) return;  // frozen (training.freeze freezes both or neither)
    if (!splitting()) return k_.embedding_backward(dwte, dwpe, dout, tokens, positions, vocab_start, B, Tn, C, V, P);
    const T* kept = keep(k_, dout, static_cast<long>(B) * Tn * C);
    const kernels::KernelTable<T>* k = &k_;
    record([=] { k->embedding_backward(dwte, dwpe, kept, tokens, positions, vocab_start, B, Tn, C, V, P); });
  }

 private:
  struct Record {
    int layer;
    std::function<void()> call;
  };
  struct Slot {
    char* store;
    std::size_t bytes;
    const char *begin, *end;
    std::size_t used;
    std::vector<Record> records;
  };

  template <typename S>
  void defer_gemm(const kernels::KernelTable<S>& k, float* dweight, float* dbias, const S* dout, const S* inp, long N, int IC, int OC) {
    if (!dweight && !dbias) return;  // a frozen layer (training.freeze): nothing to make at W
    const S* kept_dout = keep(k, dout, N * OC);
    const S* kept_inp = keep(k, inp, N * IC);
    const kernels::KernelTable<S>* table = &k;
    // dinp and weight null: only dweight (and dbias) are computed, and the weights are not read (ZeRO-3
    // may have given them back by then).
    record([=] { table->matmul_backward(nullptr, dweight, dbias, kept_dout, kept_inp, nullptr, N, IC, OC); });
  }

  void record(std::function<void()> call) { current_->records.push_back({layer_, std::move(call)}); }

  // p itself when it lies in the slot's activations, else a copy of its n elements in the slot's store.
  template <typename S>
  const S* keep(const kernels::KernelTable<S>& k, const S* p, long n) {
    const char* c = reinterpret_cast<const char*>(p);
    if (c >= current_->begin && c < current_->end) return p;
    constexpr std::size_t kAlign = 64;
    const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(S) + kAlign - 1) / kAlign * kAlign;
    if (current_->used + bytes > current_->bytes)
      fatal("internal error: a split backward keeps more than its slot's planned " + std::to_string(current_->bytes) + " bytes");
    S* copy = reinterpret_cast<S*>(current_->store + current_->used);
    current_->used += bytes;
    k.copy(copy, p, n);
    return copy;
  }

  const kernels::KernelTable<T>& k_;
  std::vector<Slot> slots_;
  Slot* current_ = nullptr;
  int layer_ = 0;
};

}  // namespace dtrain
