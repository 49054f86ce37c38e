// Host backend, bf16 storage: every kernel of kernel_api.inc for KT = bf16, as "bf16 storage, fp32
// arithmetic": the bf16 inputs are widened into fp32 scratch, the fp32 kernel runs, and the bf16
// outputs are rounded back (to nearest even). The results are what a bf16 run on a GPU computes up
// to summation order. This backend exists so that the mixed-precision logic (master weights, bf16
// activations and messages, checkpoints) is tested on every machine; it is not tuned for speed.
// The scratch is per thread and reused; it only grows (on the first steps), and no device memory is
// involved.
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {
namespace {

// fp32 <-> bf16 over arrays, eight lanes at a time with AVX2 (the same rounding as to_bf16: nearest
// even, NaN stays a quiet NaN), the scalar conversions for the tail and on other machines.
void widen_all(float* out, const bf16* x, std::size_t n) {
  std::size_t i = 0;
#ifdef __AVX2__
  for (; i + 8 <= n; i += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
#endif
  for (; i < n; ++i) out[i] = to_float(x[i]);
}

void narrow_all(bf16* out, const float* x, std::size_t n) {
  std::size_t i = 0;
#ifdef __AVX2__
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000), half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, abs_mask), inf);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(half, lsb));
    const __m256i top = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, _mm256_or_si256(bits, quiet), is_nan), 16);
    // 8 x u32 (each < 2^16) -> 8 x u16: pack within the 128-bit lanes, then bring the lanes together.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(top, top), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
#endif
  for (; i < n; ++i) out[i] = to_bf16(x[i]);
}

// fp32 buffers handed out in order during one kernel call, reused by the next.
class Scratch {
 public:
  Scratch() : pool_(pool()) { next_ = 0; }
  float* buffer(std::size_t n) {
    if (next_ == pool_.size()) pool_.emplace_back();
    std::vector<float>& v = pool_[next_++];
    if (v.size() < n) v.resize(n);
    return v.data();
  }
  float* wide(const bf16* x, std::size_t n) {
    if (!x) return nullptr;
    float* out = buffer(n);
    widen_all(out, x, n);
    return out;
  }

 private:
  static std::vector<std::vector<float>>& pool() {
    thread_local std::vector<std::vector<float>> p;
    return p;
  }
  std::vector<std::vector<float>>& pool_;
  std::size_t next_ = 0;
};

void store(bf16* out, const float* x, std::size_t n) { narrow_all(out, x, n); }

std::size_t sz(long n) { return static_cast<std::size_t>(n); }

}  // namespace

void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int vocab_start, int B, int T, int C, int V) {
  Scratch s;
  const std::size_t rows = sz(B) * sz(T);
  float* o = s.buffer(rows * sz(C));
  embedding_forward(o, tokens, s.wide(wte, sz(V) * sz(C)), s.wide(wpe, sz(T) * sz(C)), vocab_start, B, T, C, V);
  store(out, o, rows * sz(C));
}

void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int vocab_start, int B, int T, int C, int V) {
  Scratch s;
  embedding_backward(dwte, dwpe, s.wide(dout, sz(B) * sz(T) * sz(C)), tokens, vocab_start, B, T, C, V);
}

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias, long N, int C,
                       float eps) {
  Scratch s;
  const std::size_t n = sz(N) * sz(C);
  float* o = s.buffer(n);
  layernorm_forward(o, mean, rstd, s.wide(inp, n), s.wide(weight, sz(C)), s.wide(bias, sz(C)), N, C, eps);
  store(out, o, n);
}

void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                        const float* mean, const float* rstd, long N, int C) {
  Scratch s;
  const std::size_t n = sz(N) * sz(C);
  float* dx = s.wide(dinp, n);  // accumulated into
  layernorm_backward(dx, dweight, dbias, s.wide(dout, n), s.wide(inp, n), s.wide(weight, sz(C)), mean, rstd, N, C);
  store(dinp, dx, n);
}

void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, long N, int IC, int OC) {
  Scratch s;
  float* o = s.buffer(sz(N) * sz(OC));
  matmul_forward(o, s.wide(inp, sz(N) * sz(IC)), s.wide(weight, sz(OC) * sz(IC)), s.wide(bias, sz(OC)), N, IC, OC);
  store(out, o, sz(N) * sz(OC));
}

void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight, long N,
                     int IC, int OC) {
  Scratch s;
  float* dx = dinp ? s.buffer(sz(N) * sz(IC)) : nullptr;
  matmul_backward(dx, dweight, dbias, s.wide(dout, sz(N) * sz(OC)), s.wide(inp, sz(N) * sz(IC)), s.wide(weight, sz(OC) * sz(IC)),
                  N, IC, OC);
  if (dinp) store(dinp, dx, sz(N) * sz(IC));
}

void matmul_forward_wide(float* out, const bf16* inp, const bf16* weight, const bf16* bias, long N, int IC, int OC) {
  Scratch s;
  matmul_forward(out, s.wide(inp, sz(N) * sz(IC)), s.wide(weight, sz(OC) * sz(IC)), s.wide(bias, sz(OC)), N, IC, OC);
}

void matmul_backward_wide(float* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                          long N, int IC, int OC) {
  Scratch s;
  matmul_backward(dinp, dweight, dbias, s.wide(dout, sz(N) * sz(OC)), s.wide(inp, sz(N) * sz(IC)),
                  s.wide(weight, sz(OC) * sz(IC)), N, IC, OC);
}

void attention_forward(bf16* out, float* lse, float* scratch, const bf16* qkv, int B, int T, int NH, int NKV, int HD) {
  Scratch s;
  const std::size_t rows = sz(B) * sz(T), C = sz(NH) * sz(HD), W = sz(NH + 2 * NKV) * sz(HD);
  float* o = s.buffer(rows * C);
  attention_forward(o, lse, scratch, s.wide(qkv, rows * W), B, T, NH, NKV, HD);
  store(out, o, rows * C);
}

void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv, int B, int T,
                        int NH, int NKV, int HD) {
  Scratch s;
  const std::size_t rows = sz(B) * sz(T), C = sz(NH) * sz(HD), W = sz(NH + 2 * NKV) * sz(HD);
  float* dq = s.buffer(rows * W);
  attention_backward(dq, scratch, s.wide(dout, rows * C), s.wide(out, rows * C), lse, s.wide(qkv, rows * W), B, T, NH, NKV, HD);
  store(dqkv, dq, rows * W);
}

void rope_forward(bf16* x, int B, int T, int W, int H, int HD, int R, float base, int t0) {
  Scratch s;
  const std::size_t n = sz(B) * sz(T) * sz(W);
  float* w = s.wide(x, n);
  rope_forward(w, B, T, W, H, HD, R, base, t0);
  store(x, w, n);
}

void rope_backward(bf16* dx, int B, int T, int W, int H, int HD, int R, float base, int t0) {
  Scratch s;
  const std::size_t n = sz(B) * sz(T) * sz(W);
  float* w = s.wide(dx, n);
  rope_backward(w, B, T, W, H, HD, R, base, t0);
  store(dx, w, n);
}

// The rows of a strided block as fp32: rows of stride `stride`, the last `width` wide.
static float* wide_rows(Scratch& s, const bf16* x, int rows, int stride, int width) {
  return rows > 0 ? s.wide(x, sz(rows - 1) * sz(stride) + sz(width)) : nullptr;
}

void attention_block_forward(float* out, float* lse, float* scratch, const bf16* q, int qs, const bf16* kv, int ks, int Tq, int Tk,
                             int NH, int NKV, int HD, bool causal) {
  Scratch s;
  attention_block_forward(out, lse, scratch, wide_rows(s, q, Tq, qs, NH * HD), qs, wide_rows(s, kv, Tk, ks, 2 * NKV * HD), ks, Tq,
                          Tk, NH, NKV, HD, causal);
}

void attention_block_backward(float* dq, float* dkv, int dks, float* scratch, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* q, int qs, const bf16* kv, int ks, int Tq, int Tk, int NH, int NKV, int HD, bool causal) {
  Scratch s;
  const std::size_t rows = sz(Tq) * sz(NH) * sz(HD);
  attention_block_backward(dq, dkv, dks, scratch, s.wide(dout, rows), s.wide(out, rows), lse, wide_rows(s, q, Tq, qs, NH * HD), qs,
                           wide_rows(s, kv, Tk, ks, 2 * NKV * HD), ks, Tq, Tk, NH, NKV, HD, causal);
}

void copy_columns(bf16* out, const bf16* inp, long N, int W, int col, int w) {
  for (long i = 0; i < N; ++i) std::copy(inp + i * W + col, inp + i * W + col + w, out + i * w);
}

void narrow_columns(bf16* out, const float* inp, long N, int W, int col, int w) {
  for (long i = 0; i < N; ++i) narrow_all(out + i * W + col, inp + i * w, sz(w));
}

void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, long N, int C, float eps) {
  Scratch s;
  const std::size_t n = sz(N) * sz(C);
  float* o = s.buffer(n);
  rmsnorm_forward(o, rstd, s.wide(inp, n), s.wide(weight, sz(C)), N, C, eps);
  store(out, o, n);
}

void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight, const float* rstd, long N,
                      int C) {
  Scratch s;
  const std::size_t n = sz(N) * sz(C);
  float* dx = s.wide(dinp, n);  // accumulated into, like the residual stream it feeds
  rmsnorm_backward(dx, dweight, s.wide(dout, n), s.wide(inp, n), s.wide(weight, sz(C)), rstd, N, C);
  store(dinp, dx, n);
}

void swiglu_forward(bf16* out, const bf16* inp, long N, int F) {
  Scratch s;
  float* o = s.buffer(sz(N) * sz(F));
  swiglu_forward(o, s.wide(inp, 2 * sz(N) * sz(F)), N, F);
  store(out, o, sz(N) * sz(F));
}

void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, long N, int F) {
  Scratch s;
  float* dx = s.buffer(2 * sz(N) * sz(F));
  swiglu_backward(dx, s.wide(inp, 2 * sz(N) * sz(F)), s.wide(dout, sz(N) * sz(F)), N, F);
  store(dinp, dx, 2 * sz(N) * sz(F));
}

void gelu_forward(bf16* out, const bf16* inp, long n) {
  Scratch s;
  float* o = s.buffer(sz(n));
  gelu_forward(o, s.wide(inp, sz(n)), n);
  store(out, o, sz(n));
}

void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, long n) {
  Scratch s;
  float* dx = s.buffer(sz(n));
  gelu_backward(dx, s.wide(inp, sz(n)), s.wide(dout, sz(n)), n);
  store(dinp, dx, sz(n));
}

void residual_forward(bf16* out, const bf16* inp1, const bf16* inp2, long n) {
  for (long i = 0; i < n; ++i) out[i] = to_bf16(to_float(inp1[i]) + to_float(inp2[i]));
}

void moe_gather_rows(bf16* out, const bf16* inp, const int* src, const float* scale, long R, int C) {
  Scratch s;
  float* o = s.buffer(sz(R) * sz(C));
  long N = 0;  // rows of inp that src reaches
  for (long r = 0; r < R; ++r) N = std::max(N, static_cast<long>(src[r]) + 1);
  moe_gather_rows(o, s.wide(inp, sz(N) * sz(C)), src, scale, R, C);
  store(out, o, sz(R) * sz(C));
}

void moe_row_dots(float* dw, const bf16* dy, const float* rows, const int* pos, long N, int K, int C) {
  Scratch s;
  moe_row_dots(dw, s.wide(dy, sz(N) * sz(C)), rows, pos, N, K, C);
}

void copy(bf16* out, const bf16* inp, long n) {
  if (out != inp) std::memcpy(out, inp, sizeof(bf16) * sz(n));
}

void zero(bf16* x, long n) { std::memset(x, 0, sizeof(bf16) * sz(n)); }

void xent_row_max(float* row_max, const bf16* logits, long N, int V) {
  Scratch s;
  xent_row_max(row_max, s.wide(logits, sz(N) * sz(V)), N, V);
}

void xent_row_sum_exp(float* row_sum, const bf16* logits, const float* row_max, long N, int V) {
  Scratch s;
  xent_row_sum_exp(row_sum, s.wide(logits, sz(N) * sz(V)), row_max, N, V);
}

void xent_target_logit(float* target_logit, const bf16* logits, const int* targets, int vocab_start, long N, int V) {
  Scratch s;
  xent_target_logit(target_logit, s.wide(logits, sz(N) * sz(V)), targets, vocab_start, N, V);
}

void xent_backward(bf16* dlogits, const bf16* logits, const float* lse, const int* targets, const float* dloss, int vocab_start,
                   long N, int V) {
  Scratch s;
  float* x = s.wide(logits, sz(N) * sz(V));
  xent_backward(x, x, lse, targets, dloss, vocab_start, N, V);  // in place, as the fp32 kernel allows
  store(dlogits, x, sz(N) * sz(V));
}

void adamw_update(float* master, bf16* copy, float* m, float* v, const float* grad, const AdamRun* runs, int count, long elements,
                  float lr, float beta1, float beta2, float eps, int t) {
  adamw_update(master, static_cast<float*>(nullptr), m, v, grad, runs, count, elements, lr, beta1, beta2, eps, t);
  if (copy)
    for (int r = 0; r < count; ++r) store(copy + runs[r].offset, master + runs[r].offset, sz(runs[r].count));
}

void narrow(bf16* out, const float* inp, long n) { store(out, inp, sz(n)); }

void widen(float* out, const bf16* inp, long n) { widen_all(out, inp, sz(n)); }

}  // namespace dtrain::kernels::host
