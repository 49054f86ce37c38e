// KvDecoderImpl<T>: the cache, the rows of an extend through the blocks (as GptModelImpl's
// block_forward computes them without parallelism), and the head of each sequence's last row.
#include "model/kv_decoder.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"
#include "model/device_values.hpp"
#include "model/kv_decoder_factory.hpp"
#include "runtime/arena.hpp"

namespace dtrain {
namespace {

template <typename T>
class KvDecoderImpl final : public KvDecoder {
 public:
  KvDecoderImpl(const RankPlan& plan, const ModelParams<T>& p, const kernels::KernelTable<T>& k, Device& device, int batch)
      : m_(plan.shape), d_(plan.activations.dims), p_(p), k_(k), device_(device), batch_(batch), cap_(plan.shape.seq_length),
        rows_(static_cast<long>(batch) * cap_), lengths_(static_cast<std::size_t>(batch), 0) {
    const long R = rows_;
    const auto of = [&](long n) { return Arena(device, static_cast<std::size_t>(n) * sizeof(T)); };
    const auto floats = [&](long n) { return Arena(device, static_cast<std::size_t>(n) * sizeof(float)); };
    x_ = of(R * d_.C), y_ = of(R * d_.C), ln_ = of(R * d_.C), qkv_ = of(R * d_.QKVl()), atty_ = of(R * d_.C), res1_ = of(R * d_.C);
    fch_ = of(R * d_.Hl()), act_ = of(R * d_.Fl), logits_ = of(static_cast<long>(batch) * d_.Vl);
    cache_ = of(static_cast<long>(p.blocks.size()) * R * kv_width());
    mean_ = floats(R), rstd_ = floats(R), acc_ = floats(R * d_.C), lse_ = floats(R * d_.NHl);
    scratch_ = floats(static_cast<long>(d_.NHl) * cap_ * cap_);
    ids_ = Arena(device, 2 * static_cast<std::size_t>(R) * sizeof(int));
  }

  void extend(const std::vector<std::vector<int>>& new_tokens, float* logits) override {
    if (static_cast<int>(new_tokens.size()) != batch_) fatal("KvDecoder::extend: one list of tokens per sequence");
    // The rows of this extend, sequence after sequence: their ids and positions.
    std::vector<int> host(2 * static_cast<std::size_t>(rows_));
    std::vector<long> first(static_cast<std::size_t>(batch_) + 1, 0);
    for (int b = 0; b < batch_; ++b) {
      const auto& t = new_tokens[static_cast<std::size_t>(b)];
      const int at = lengths_[static_cast<std::size_t>(b)];
      if (at + static_cast<long>(t.size()) > cap_) fatal("KvDecoder::extend: a sequence beyond model.seq_length");
      const long r0 = first[static_cast<std::size_t>(b)];
      for (std::size_t i = 0; i < t.size(); ++i) {
        host[static_cast<std::size_t>(r0) + i] = t[i];
        host[static_cast<std::size_t>(rows_ + r0) + i] = at + static_cast<int>(i);
      }
      first[static_cast<std::size_t>(b) + 1] = r0 + static_cast<long>(t.size());
    }
    const long N = first.back();
    if (N == 0) return;
    int* ids = ids_.as<int>();
    const int* positions = ids + rows_;
    device_.copy(ids, host.data(), host.size() * sizeof(int));

    const T* wpe = p_.wpe;
    k_.embedding_forward(x_.as<T>(), ids, p_.wte, wpe, wpe ? positions : nullptr, 0, 1, static_cast<int>(N), d_.C, d_.Vl);
    T* in = x_.as<T>();
    T* out = y_.as<T>();
    for (std::size_t l = 0; l < p_.blocks.size(); ++l) {
      block(l, p_.blocks[l], in, out, positions, first);
      std::swap(in, out);
    }
    // The final norm of every row, the head of each extended sequence's last.
    norm(ln_.as<T>(), in, p_.lnf_w, p_.lnf_b, N);
    for (int b = 0; b < batch_; ++b) {
      const long r0 = first[static_cast<std::size_t>(b)], r1 = first[static_cast<std::size_t>(b) + 1];
      if (r1 == r0) continue;
      T* row = logits_.as<T>() + static_cast<long>(b) * d_.Vl;
      k_.matmul_forward(row, ln_.as<T>() + (r1 - 1) * d_.C, p_.head, nullptr, 1, d_.C, d_.Vl);
      read_values(device_, logits + static_cast<long>(b) * d_.Vl, row, d_.Vl);
      lengths_[static_cast<std::size_t>(b)] += static_cast<int>(r1 - r0);
    }
  }

  int length(int b) const override { return lengths_.at(static_cast<std::size_t>(b)); }
  void clear(int b) override { lengths_.at(static_cast<std::size_t>(b)) = 0; }
  int batch() const override { return batch_; }
  int capacity() const override { return cap_; }

 private:
  int kv_width() const { return 2 * d_.NKVl * d_.HD(); }
  void norm(T* out, const T* inp, const T* w, const T* b, long N) {
    if (m_.rmsnorm)
      k_.rmsnorm_forward(out, rstd_.as<float>(), inp, w, N, d_.C, m_.norm_eps);
    else
      k_.layernorm_forward(out, mean_.as<float>(), rstd_.as<float>(), inp, w, b, N, d_.C, m_.norm_eps);
  }

  // One block on the extend's rows: x (N,C) -> y (N,C), the rows' keys and values into layer l's cache.
  void block(std::size_t l, const BlockParams<T>& p, const T* x, T* y, const int* positions, const std::vector<long>& first) {
    const long N = first.back();
    const int W = d_.QKVl(), KW = kv_width(), C = d_.C, NH = d_.NHl;
    T* qkv = qkv_.as<T>();
    norm(ln_.as<T>(), x, p.ln1_w, p.ln1_b, N);
    k_.matmul_forward(qkv, ln_.as<T>(), p.qkv_w, p.qkv_b, N, C, W);
    if (m_.rope) k_.rope_forward(qkv, 1, static_cast<int>(N), W, NH + d_.NKVl, d_.HD(), m_.rotary_dim, m_.rope_frequencies, 0, positions);
    T* cache = cache_.as<T>() + static_cast<long>(l) * rows_ * KW;
    k_.fill(acc_.as<float>(), 0.0f, N * C);
    k_.fill(lse_.as<float>(), -std::numeric_limits<float>::infinity(), N * NH);
    for (int b = 0; b < batch_; ++b) {
      const long r0 = first[static_cast<std::size_t>(b)], n = first[static_cast<std::size_t>(b) + 1] - r0;
      if (n == 0) continue;
      const int at = lengths_[static_cast<std::size_t>(b)];
      T* seq = cache + static_cast<long>(b) * cap_ * KW;
      k_.copy_columns(seq + static_cast<long>(at) * KW, qkv + r0 * W, n, W, C, KW);
      // The new rows (positions at..at+n-1) against every cached key of the sequence, causally.
      k_.attention_block_forward(acc_.as<float>() + r0 * C, lse_.as<float>() + r0 * NH, scratch_.as<float>(), qkv + r0 * W, W, seq, KW,
                                 static_cast<int>(n), at + static_cast<int>(n), NH, d_.NKVl, d_.HD(), at, 0, nullptr);
    }
    k_.narrow(atty_.as<T>(), acc_.as<float>(), N * C);
    T* res1 = res1_.as<T>();
    k_.matmul_forward(res1, atty_.as<T>(), p.proj_w, p.proj_b, N, C, C);
    if (m_.rmsnorm)
      k_.residual_rmsnorm_forward(res1, ln_.as<T>(), rstd_.as<float>(), res1, x, p.ln2_w, N, C, m_.norm_eps);
    else
      k_.residual_layernorm_forward(res1, ln_.as<T>(), mean_.as<float>(), rstd_.as<float>(), res1, x, p.ln2_w, p.ln2_b, N, C, m_.norm_eps);
    if (m_.swiglu) {
      k_.matmul_forward(fch_.as<T>(), ln_.as<T>(), p.fc_w, p.fc_b, N, C, d_.Hl());
      k_.swiglu_forward(act_.as<T>(), fch_.as<T>(), N, d_.Fl);
    } else {
      k_.matmul_forward_gelu(act_.as<T>(), fch_.as<T>(), ln_.as<T>(), p.fc_w, p.fc_b, N, C, d_.Hl());
    }
    k_.matmul_forward(y, act_.as<T>(), p.fcproj_w, p.fcproj_b, N, d_.Fl, C);
    k_.residual_forward(y, y, res1, N * C);
  }

  ModelShape m_;
  ActivationDims d_;
  ModelParams<T> p_;
  const kernels::KernelTable<T>& k_;
  Device& device_;
  int batch_, cap_;
  long rows_;
  std::vector<int> lengths_;
  Arena x_, y_, ln_, qkv_, atty_, res1_, fch_, act_, logits_, cache_, mean_, rstd_, acc_, lse_, scratch_, ids_;
};

}  // namespace

template <typename T>
std::unique_ptr<KvDecoder> make_kv_decoder(const RankPlan& plan, const ModelParams<T>& params, const kernels::KernelTable<T>& k,
                                           Device& device, int batch) {
  if (!plan.part.embedding || !plan.part.head || plan.sizes.tp != 1 || plan.activations.dims.cp != 1 || plan.shape.experts > 0)
    return nullptr;
  return std::make_unique<KvDecoderImpl<T>>(plan, params, k, device, batch);
}

template std::unique_ptr<KvDecoder> make_kv_decoder<float>(const RankPlan&, const ModelParams<float>&, const kernels::KernelTable<float>&,
                                                           Device&, int);
template std::unique_ptr<KvDecoder> make_kv_decoder<bf16>(const RankPlan&, const ModelParams<bf16>&, const kernels::KernelTable<bf16>&,
                                                          Device&, int);
template std::unique_ptr<KvDecoder> make_kv_decoder<fp16>(const RankPlan&, const ModelParams<fp16>&, const kernels::KernelTable<fp16>&,
                                                          Device&, int);

}  // namespace dtrain
