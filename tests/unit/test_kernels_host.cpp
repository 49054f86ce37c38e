// Host kernel tests: every forward against an independent double-precision reference, every backward
// against central finite differences of that double reference (never of the float kernel), plus the
// accumulate (+=) / overwrite (=) conventions of kernel_api.inc, aliasing, the vocab-split cross
// entropy, determinism, and the fast exp of kernels/host/host_math.hpp.
//
// Tolerances (|got - ref| <= rtol * |ref| + atol, atol scaled by the tensor's largest |ref|), derived
// from float32's unit roundoff u = 2^-24 = 6e-8 and the longest sum each kernel forms:
// - our own kernels sum in kLanes = 16 interleaved chains, then the lanes (host_math.hpp; the exp sums
//   in blocks of 1024, each block's float lanes added in double), so a sum of n terms is off by at most
//   (ceil(n / 16) + 16) u of the sum of its terms' magnitudes (Higham, Accuracy and Stability, 3.1),
//   plus 2.5 u per fast exp (measured over its whole range below). The longest sums here: C = 768
//   (64 u = 3.8e-6) and a block of 1024 exps (83 u = 4.9e-6). Forwards: rtol 1e-5 = 168 u covers them
//   where the terms cancel by up to 2x; atol 1e-6 of the largest value covers elements that cancel more.
//   These kernels are compiled for one instruction set (x86-64-v3, CMakeLists.txt) and use no run-time
//   dispatch, so they round alike on every CPU the README supports.
// - kernels that call sgemm (matmul, attention) sum in an order the BLAS picks per CPU: they are checked
//   element by element against the order-free bound (check_bounded), with the magnitudes computed by the
//   double reference.
// - gradients: rtol 1e-4, atol 1e-5 * max|ref|. The analytic side is float32 and goes through more
//   steps (a backward pass re-forms the forward's sums, e.g. softmax backward, layernorm's mean
//   subtractions: at most 3 sums of at most 133 terms, attention's T: 3 x 133 u = 2.4e-5); the finite difference is
//   taken on a double forward with h = 1e-6, so its own error (h^2 truncation, 1e-16/h rounding) is
//   ~1e-10.
// The absolute floor handles elements whose exact gradient is (near) zero, where a relative bound is
// meaningless. Sizes are small and odd (tails of the 16-lane loops, attention blocks of 128 rows).
// KTEST_VERBOSE=1 in the environment prints every comparison's worst element (a margin report).
#include <catch2/catch.hpp>

#include "kernels/attention_scratch.hpp"

#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace k = dtrain::kernels::host;

namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;

constexpr double kFwdRtol = 1e-5, kFwdAtol = 1e-6;
constexpr double kGradRtol = 1e-4, kGradAtol = 1e-5;
constexpr double kFdStep = 1e-6;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Vec random_vec(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Vec v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

DVec to_double(const Vec& v) { return DVec(v.begin(), v.end()); }

double max_abs(const DVec& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Checks |got[i] - ref[i]| <= rtol*|ref[i]| + atol_rel*max|ref| for every i (NaN fails) and reports the
// worst element relative to its allowance.
void check_close(const std::string& what, const float* got, const DVec& ref, double rtol, double atol_rel) {
  const double atol = atol_rel * std::max(max_abs(ref), 1e-30);
  size_t bad = 0, worst = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double allowed = rtol * std::fabs(ref[i]) + atol;
    const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity() : err / allowed;
    if (!(err <= allowed)) ++bad;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  std::ostringstream msg;
  msg.precision(10);
  msg << what << ": " << bad << " of " << ref.size() << " elements outside tolerance (rtol " << rtol
      << ", atol " << atol << "); worst i=" << worst;
  if (!ref.empty()) msg << " got=" << got[worst] << " ref=" << ref[worst] << " err/allowed=" << worst_ratio;
  INFO(msg.str());
  if (std::getenv("KTEST_VERBOSE")) WARN(msg.str());
  CHECK(bad == 0);
}

void check_close(const std::string& what, const Vec& got, const DVec& ref, double rtol, double atol_rel) {
  REQUIRE(got.size() == ref.size());
  check_close(what, got.data(), ref, rtol, atol_rel);
}

// The componentwise bound of a sum computed in float32, whatever its order, blocking or use of FMA
// (Higham, Accuracy and Stability, 3.1): |fl(sum) - sum| <= terms * u * sum of |terms|, u = 2^-24.
// Checks |got[i] - ref[i]| <= terms * u * magnitude[i] for every i (magnitude: the sum of the
// absolute values of ref[i]'s terms, computed in double); used where the kernel calls a BLAS, whose
// summation order differs between CPUs.
void check_bounded(const std::string& what, const Vec& got, const DVec& ref, const DVec& magnitude, double terms) {
  REQUIRE(got.size() == ref.size());
  REQUIRE(magnitude.size() == ref.size());
  size_t bad = 0, worst = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double allowed = terms * 0x1p-24 * magnitude[i];
    const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity() : err / std::max(allowed, 1e-300);
    if (!(err <= allowed)) ++bad;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
  }
  std::ostringstream msg;
  msg.precision(10);
  msg << what << ": " << bad << " of " << ref.size() << " elements outside " << terms << " u of their terms' magnitude; worst i="
      << worst << " got=" << got[worst] << " ref=" << ref[worst] << " err/allowed=" << worst_ratio;
  INFO(msg.str());
  if (std::getenv("KTEST_VERBOSE")) WARN(msg.str());
  CHECK(bad == 0);
}

DVec absolute(DVec v) {
  for (double& x : v) x = std::fabs(x);
  return v;
}

// Indices to finite-difference: all of [0, n) when n <= limit, else `limit` distinct random ones.
std::vector<size_t> sample_indices(size_t n, size_t limit, std::mt19937& rng) {
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  if (n <= limit) return idx;
  std::shuffle(idx.begin(), idx.end(), rng);
  idx.resize(limit);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Central differences dL/dx[i] for i in idx; loss() reads x (perturbed in place, then restored).
template <class Loss>
DVec fd_grad(Loss&& loss, DVec& x, const std::vector<size_t>& idx, double h = kFdStep) {
  DVec g(idx.size());
  for (size_t s = 0; s < idx.size(); ++s) {
    const size_t i = idx[s];
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    g[s] = (lp - lm) / (2.0 * h);
  }
  return g;
}

// Gathers analytic[idx[s]] (optionally minus a pre-fill base) for comparison with fd_grad.
Vec gather(const Vec& analytic, const std::vector<size_t>& idx, const Vec* base = nullptr) {
  Vec out(idx.size());
  for (size_t s = 0; s < idx.size(); ++s) out[s] = analytic[idx[s]] - (base ? (*base)[idx[s]] : 0.0f);
  return out;
}

// Checks the analytic gradient of x against central differences of loss() at sampled indices.
template <class Loss>
void check_grad(const std::string& what, Loss&& loss, DVec& x, const Vec& analytic, std::mt19937& rng,
                size_t limit = 100000, const Vec* base = nullptr) {
  REQUIRE(analytic.size() == x.size());
  const auto idx = sample_indices(x.size(), limit, rng);
  const DVec fd = fd_grad(loss, x, idx);
  check_close(what + " (vs finite differences)", gather(analytic, idx, base), fd, kGradRtol, kGradAtol);
}

double dot(const DVec& a, const DVec& r) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * r[i];
  return s;
}

// ---------------------------------------------------------------- double references

DVec ref_embedding(const std::vector<int>& tokens, const DVec& wte, const DVec* wpe, int vocab_start, int B, int T,
                   int C, int V, const std::vector<int>* positions = nullptr) {
  DVec out(static_cast<size_t>(B) * T * C, 0.0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int tok = tokens[b * T + t];
      const int pos = positions ? (*positions)[b * T + t] : t;
      for (int c = 0; c < C; ++c) {
        double v = 0.0;
        if (tok >= vocab_start && tok < vocab_start + V) v += wte[(tok - vocab_start) * C + c];
        if (wpe) v += (*wpe)[pos * C + c];
        out[(b * T + t) * C + c] = v;
      }
    }
  return out;
}

struct LnRef {
  DVec out, mean, rstd;
};
LnRef ref_layernorm(const DVec& x, const DVec& w, const DVec& bias, int N, int C) {
  LnRef r{DVec(x.size()), DVec(N), DVec(N)};
  for (int i = 0; i < N; ++i) {
    double m = 0.0;
    for (int c = 0; c < C; ++c) m += x[i * C + c];
    m /= C;
    double var = 0.0;
    for (int c = 0; c < C; ++c) var += (x[i * C + c] - m) * (x[i * C + c] - m);
    var /= C;
    const double s = 1.0 / std::sqrt(var + 1e-5);
    for (int c = 0; c < C; ++c) r.out[i * C + c] = (x[i * C + c] - m) * s * w[c] + bias[c];
    r.mean[i] = m;
    r.rstd[i] = s;
  }
  return r;
}

DVec ref_matmul(const DVec& x, const DVec& w, const DVec* bias, int N, int IC, int OC) {
  DVec out(static_cast<size_t>(N) * OC);
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int c = 0; c < IC; ++c) s += x[i * IC + c] * w[o * IC + c];
      out[i * OC + o] = s;
    }
  return out;
}

struct AttRef {
  DVec out, lse;  // (B,T,NH*HD), (B,NH,T)
};
// Query head h reads key/value head h / (NH/NKV); rows are [q (NH*HD) | k (NKV*HD) | v (NKV*HD)].
// doc_start (B,T) or null: row i of a sample sees keys doc_start[i] <= j <= i (an explicit
// block-diagonal causal mask), else j <= i.
// Query row i sees key j when j <= i (causal), j is in its document (j >= doc_start[i]) and, with a
// sliding window (window > 0), i - j < window (Hugging Face's mask: kv_idx > q_idx - sliding_window).
AttRef ref_attention(const DVec& qkv, int B, int T, int NH, int NKV, int HD, const std::vector<int>* doc_start = nullptr, int window = 0) {
  const int C = NH * HD, W = (NH + 2 * NKV) * HD, group = NH / NKV;
  AttRef r{DVec(static_cast<size_t>(B) * T * C), DVec(static_cast<size_t>(B) * NH * T)};
  DVec p(T);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HD));
  DVec s(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int i = 0; i < T; ++i) {
        const int kv = C + (h / group) * HD;
        const double* q = &qkv[(static_cast<size_t>(b) * T + i) * W + h * HD];
        const int doc = doc_start ? (*doc_start)[static_cast<size_t>(b) * T + i] : 0;
        const auto sees = [&](int j) { return j <= i && j >= doc && (window == 0 || i - j < window); };
        double m = -1e300;
        for (int j = 0; j < T; ++j) {
          if (!sees(j)) continue;
          const double* kk = &qkv[(static_cast<size_t>(b) * T + j) * W + kv];
          double d = 0.0;
          for (int e = 0; e < HD; ++e) d += q[e] * kk[e];
          s[j] = d * scale;
          m = std::max(m, s[j]);
        }
        double z = 0.0;
        for (int j = 0; j < T; ++j)
          if (sees(j)) z += std::exp(s[j] - m);
        r.lse[(static_cast<size_t>(b) * NH + h) * T + i] = m + std::log(z);
        for (int j = 0; j < T; ++j) p[j] = sees(j) ? std::exp(s[j] - m) / z : 0.0;
        double* o = &r.out[(static_cast<size_t>(b) * T + i) * C + h * HD];
        for (int e = 0; e < HD; ++e) {
          double acc = 0.0;
          for (int j = 0; j < T; ++j) acc += p[j] * qkv[(static_cast<size_t>(b) * T + j) * W + kv + NKV * HD + e];
          o[e] = acc;
        }
      }
  return r;
}

double ref_gelu(double x) {
  const double u = std::sqrt(2.0 / std::acos(-1.0)) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

// Per-row log-sum-exp and target logit (0 when the target is outside [vocab_start, vocab_start+V)).
struct XentRef {
  DVec max, sum, lse, target;
};
XentRef ref_xent(const DVec& logits, const std::vector<int>& targets, int vocab_start, int N, int V) {
  XentRef r{DVec(N), DVec(N), DVec(N), DVec(N)};
  for (int i = 0; i < N; ++i) {
    const double* x = &logits[static_cast<size_t>(i) * V];
    double m = x[0];
    for (int v = 1; v < V; ++v) m = std::max(m, x[v]);
    double s = 0.0;
    for (int v = 0; v < V; ++v) s += std::exp(x[v] - m);
    r.max[i] = m;
    r.sum[i] = s;
    r.lse[i] = m + std::log(s);
    const int col = targets[i] - vocab_start;
    r.target[i] = (col >= 0 && col < V) ? x[col] : 0.0;
  }
  return r;
}

// Runs the float forward chain the model runs: lse = max + log(sum exp(x - max)).
struct XentOut {
  Vec max, sum, lse, target;
};
XentOut run_xent(const Vec& logits, const std::vector<int>& targets, int vocab_start, int N, int V) {
  XentOut o{Vec(N), Vec(N), Vec(N), Vec(N)};
  k::xent_row_max(o.max.data(), logits.data(), N, V);
  k::xent_row_sum_exp(o.sum.data(), logits.data(), o.max.data(), N, V);
  k::xent_target_logit(o.target.data(), logits.data(), targets.data(), vocab_start, N, V);
  for (int i = 0; i < N; ++i) o.lse[i] = o.max[i] + std::log(o.sum[i]);
  return o;
}

}  // namespace

// ================================================================= fast exp

TEST_CASE("host fast_exp matches std::exp over its range", "[kernels]") {
  double worst = 0.0, worst_x = 0.0;
  const int n = 2000001;
  for (int i = 0; i < n; ++i) {
    const float x = static_cast<float>(-87.0 + 175.0 * i / (n - 1));
    const double ref = std::exp(static_cast<double>(x));
    const double rel = std::fabs(static_cast<double>(k::fast_exp(x)) - ref) / ref;
    if (rel > worst) {
      worst = rel;
      worst_x = x;
    }
  }
  INFO("worst relative error " << worst << " at x=" << worst_x);
  // The bound: 1 + r + r^2 P5(r) rounds twice at its last additions (2 u), Horner's five roundings act
  // on terms below r^2 / 2 <= 0.06 (0.3 u), the Cody-Waite reduction keeps r to u |r| and the
  // polynomial's own error is below 0.1 u; the scaling by 2^k is exact: 2.5 u = 1.5e-7 (measured
  // 8.5e-8 over every float in [-87, 88]).
  CHECK(worst < 1.5e-7);
  CHECK(k::fast_exp(0.0f) == 1.0f);
  // Clamped outside [-87, 88]: finite, positive, and equal to the value at the bound.
  CHECK(k::fast_exp(-1000.0f) == k::fast_exp(-87.0f));
  CHECK(k::fast_exp(-std::numeric_limits<float>::infinity()) == k::fast_exp(-87.0f));
  CHECK(k::fast_exp(1000.0f) == k::fast_exp(88.0f));
  CHECK(std::isfinite(k::fast_exp(88.0f)));
  CHECK(k::fast_exp(-87.0f) > 0.0f);
  // NaN propagates whatever its sign (x86's default NaN has the sign bit set).
  CHECK(std::isnan(k::fast_exp(kNaN)));
  CHECK(std::isnan(k::fast_exp(-kNaN)));
  CHECK(std::isnan(k::fast_exp(std::copysign(kNaN, -1.0f))));
}

// ================================================================= embedding

TEST_CASE("host embedding forward/backward vs double reference", "[kernels]") {
  std::mt19937 rng(101);
  const int B = 2, T = 5, C = 19, V = 6, vocab_start = 3;
  // Tokens in [0, 12): some below vocab_start, some at or above vocab_start + V; repeats included.
  std::vector<int> tokens = {3, 4, 3, 8, 0, 11, 5, 3, 9, 2};
  Vec wte = random_vec(rng, V * C), wpe = random_vec(rng, T * C);
  DVec wte_d = to_double(wte), wpe_d = to_double(wpe);

  for (const bool with_wpe : {true, false}) {
    SECTION(with_wpe ? "with wpe" : "without wpe") {
      Vec out(B * T * C, kNaN);
      k::embedding_forward(out.data(), tokens.data(), wte.data(), with_wpe ? wpe.data() : nullptr, nullptr, vocab_start, B, T,
                           C, V);
      check_close("embedding_forward", out,
                  ref_embedding(tokens, wte_d, with_wpe ? &wpe_d : nullptr, vocab_start, B, T, C, V), kFwdRtol,
                  kFwdAtol);

      const DVec R = to_double(random_vec(rng, B * T * C));
      const Vec Rf(R.begin(), R.end());
      const Vec dwte0 = random_vec(rng, V * C), dwpe0 = random_vec(rng, T * C);
      Vec dwte = dwte0, dwpe = dwpe0;
      k::embedding_backward(dwte.data(), with_wpe ? dwpe.data() : nullptr, Rf.data(), tokens.data(), nullptr, vocab_start, B,
                            T, C, V, T);
      auto loss = [&] {
        return dot(ref_embedding(tokens, wte_d, with_wpe ? &wpe_d : nullptr, vocab_start, B, T, C, V), R);
      };
      check_grad("embedding dwte (+= onto pre-filled)", loss, wte_d, dwte, rng, 100000, &dwte0);
      if (with_wpe) {
        check_grad("embedding dwpe (+= onto pre-filled)", loss, wpe_d, dwpe, rng, 100000, &dwpe0);
      } else {
        CHECK(dwpe == dwpe0);   // untouched when wpe is null
      }
      // Tokens 0, 2, 9, 11 are outside [3, 9) and must not touch dwte; no token is 7, so row 4 of dwte
      // must stay exactly as pre-filled.
      for (int c = 0; c < C; ++c) CHECK(dwte[4 * C + c] == dwte0[4 * C + c]);
    }
  }
}

// ================================================================= layernorm

TEST_CASE("host layernorm forward/backward vs double reference", "[kernels]") {
  std::mt19937 rng(202);
  const int N = 6, C = 37;   // 37 = two 16-lane blocks plus a tail
  Vec x = random_vec(rng, N * C, -2.0f, 3.0f), w = random_vec(rng, C, 0.5f, 1.5f), bias = random_vec(rng, C);
  DVec xd = to_double(x), wd = to_double(w), bd = to_double(bias);

  Vec out(N * C, kNaN), mean(N, kNaN), rstd(N, kNaN);
  k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C, 1e-5f);
  const LnRef ref = ref_layernorm(xd, wd, bd, N, C);
  check_close("layernorm out", out, ref.out, kFwdRtol, kFwdAtol);
  check_close("layernorm mean", mean, ref.mean, kFwdRtol, kFwdAtol);
  check_close("layernorm rstd", rstd, ref.rstd, kFwdRtol, kFwdAtol);

  const DVec R = to_double(random_vec(rng, N * C));
  const Vec Rf(R.begin(), R.end());
  const Vec dinp0 = random_vec(rng, N * C);   // dinp is accumulated (+=): pre-fill it
  Vec dinp = dinp0, dw(C, 0.0f), db(C, 0.0f);
  k::layernorm_backward(dinp.data(), dw.data(), db.data(), Rf.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                        C);
  auto loss = [&] { return dot(ref_layernorm(xd, wd, bd, N, C).out, R); };
  check_grad("layernorm dinp (+= onto pre-filled)", loss, xd, dinp, rng, 100000, &dinp0);
  check_grad("layernorm dweight", loss, wd, dw, rng);
  check_grad("layernorm dbias", loss, bd, db, rng);

  SECTION("a second backward call accumulates again") {
    const Vec dw1 = dw, db1 = db, dinp1 = dinp;
    k::layernorm_backward(dinp.data(), dw.data(), db.data(), Rf.data(), x.data(), w.data(), mean.data(), rstd.data(),
                          N, C);
    DVec dw2(C), db2(C), dinp2(N * C);
    for (int c = 0; c < C; ++c) {
      dw2[c] = 2.0 * dw1[c];
      db2[c] = 2.0 * db1[c];
    }
    for (int i = 0; i < N * C; ++i) dinp2[i] = 2.0 * dinp1[i] - dinp0[i];
    // dweight and dbias add each row's term in turn (the terms themselves round alike in both calls):
    // after two calls a chain of 2 N additions against twice the first chain of N, both within 2 N u
    // of twice the terms' magnitudes. dinp adds the same per-call value D onto dinp0, then dinp1: two
    // roundings, 2 u of |dinp0| + 2 |D|, within 1e-6 of the largest value (|D| <= the largest).
    DVec dw_mag(C, 0.0), db_mag(C, 0.0);
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < C; ++c) {
        const double dy = Rf[i * C + c];
        db_mag[c] += 2.0 * std::fabs(dy);
        dw_mag[c] += 2.0 * std::fabs(dy * ((x[i * C + c] - mean[i]) * rstd[i]));
      }
    check_bounded("layernorm dweight after two calls", dw, dw2, dw_mag, 2 * 2 * N);
    check_bounded("layernorm dbias after two calls", db, db2, db_mag, 2 * 2 * N);
    check_close("layernorm dinp after two calls", dinp, dinp2, 1e-6, 1e-6);
  }

  SECTION("wide row (C = 768) forward") {
    const int N2 = 3, C2 = 768;
    Vec x2 = random_vec(rng, N2 * C2, -1.0f, 5.0f), w2 = random_vec(rng, C2, 0.5f, 1.5f), b2 = random_vec(rng, C2);
    Vec o2(N2 * C2), m2(N2), r2(N2);
    k::layernorm_forward(o2.data(), m2.data(), r2.data(), x2.data(), w2.data(), b2.data(), N2, C2, 1e-5f);
    const LnRef ref2 = ref_layernorm(to_double(x2), to_double(w2), to_double(b2), N2, C2);
    check_close("layernorm wide out", o2, ref2.out, kFwdRtol, kFwdAtol);
    check_close("layernorm wide rstd", r2, ref2.rstd, kFwdRtol, kFwdAtol);
  }
}

// ================================================================= matmul

TEST_CASE("host matmul forward/backward vs double reference", "[kernels]") {
  std::mt19937 rng(303);
  const int N = 5, IC = 19, OC = 7;
  Vec x = random_vec(rng, N * IC), w = random_vec(rng, OC * IC), bias = random_vec(rng, OC);
  DVec xd = to_double(x), wd = to_double(w), bd = to_double(bias);

  // sgemm: each output sums IC products and the bias, in an order the BLAS picks.
  const DVec xa = absolute(xd), wa = absolute(wd), ba = absolute(bd);
  Vec out(N * OC, kNaN);
  k::matmul_forward(out.data(), x.data(), w.data(), bias.data(), N, IC, OC);
  check_bounded("matmul_forward with bias", out, ref_matmul(xd, wd, &bd, N, IC, OC), ref_matmul(xa, wa, &ba, N, IC, OC), IC + 1);
  std::fill(out.begin(), out.end(), kNaN);
  k::matmul_forward(out.data(), x.data(), w.data(), nullptr, N, IC, OC);
  check_bounded("matmul_forward without bias", out, ref_matmul(xd, wd, nullptr, N, IC, OC), ref_matmul(xa, wa, nullptr, N, IC, OC), IC);

  const DVec R = to_double(random_vec(rng, N * OC));
  const Vec Rf(R.begin(), R.end());
  const Vec dw0 = random_vec(rng, OC * IC), db0 = random_vec(rng, OC);
  Vec dinp(N * IC, kNaN), dw = dw0, db = db0;   // dinp is written (=): NaN must vanish
  k::matmul_backward(dinp.data(), dw.data(), db.data(), Rf.data(), x.data(), w.data(), N, IC, OC);
  auto loss = [&] { return dot(ref_matmul(xd, wd, &bd, N, IC, OC), R); };
  check_grad("matmul dinp (=)", loss, xd, dinp, rng);
  check_grad("matmul dweight (+= onto pre-filled)", loss, wd, dw, rng, 100000, &dw0);
  check_grad("matmul dbias (+= onto pre-filled)", loss, bd, db, rng, 100000, &db0);

  SECTION("second call: dinp rewritten, dweight/dbias accumulate; null dinp/dbias are skipped") {
    const Vec dinp1 = dinp, dw1 = dw, db1 = db;
    k::matmul_backward(dinp.data(), dw.data(), db.data(), Rf.data(), x.data(), w.data(), N, IC, OC);
    CHECK(dinp == dinp1);
    // The second call adds the same gradient G (a sum over the N rows) again: dw = dw0 + 2 G within
    // (N + 2) u of mag = |dw0| + 2 |R|^T |x|, and the expected 2 dw1 - dw0 = dw0 + 2 G carries twice the
    // first call's error, at most 2 (N + 1) u of mag: 3 (N + 2) u of mag in all.
    DVec dw2(OC * IC), db2(OC), dw_mag(OC * IC, 0.0), db_mag(OC, 0.0);
    for (int i = 0; i < OC * IC; ++i) dw2[i] = 2.0 * dw1[i] - dw0[i];
    for (int i = 0; i < OC; ++i) db2[i] = 2.0 * db1[i] - db0[i];
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < OC; ++o) {
        db_mag[o] += 2.0 * std::fabs(R[n * OC + o]);
        for (int c = 0; c < IC; ++c) dw_mag[o * IC + c] += 2.0 * std::fabs(R[n * OC + o]) * std::fabs(xd[n * IC + c]);
      }
    for (int i = 0; i < OC * IC; ++i) dw_mag[i] += std::fabs(dw0[i]);
    for (int i = 0; i < OC; ++i) db_mag[i] += std::fabs(db0[i]);
    check_bounded("matmul dweight after two calls", dw, dw2, dw_mag, 3 * (N + 2));
    check_bounded("matmul dbias after two calls", db, db2, db_mag, 3 * (N + 2));

    Vec dw_only(OC * IC, 0.0f);
    k::matmul_backward(nullptr, dw_only.data(), nullptr, Rf.data(), x.data(), w.data(), N, IC, OC);
    DVec dw_grad(OC * IC);
    for (int i = 0; i < OC * IC; ++i) dw_grad[i] = static_cast<double>(dw1[i]) - dw0[i];
    check_close("matmul dweight with null dinp/dbias", dw_only, dw_grad, 1e-5, 1e-6);
  }
}

// ================================================================= attention

namespace {

// doc_start (B,T) or empty: documents packed in each sample; window: the sliding window (0: none).
void run_attention_check(int B, int T, int NH, int NKV, int HD, size_t fd_limit, unsigned seed, const std::vector<int>& docs = {},
                         int window = 0) {
  const std::vector<int>* doc = docs.empty() ? nullptr : &docs;
  const dtrain::kernels::KeyVisibility ds{docs.empty() ? nullptr : docs.data(), window};
  std::mt19937 rng(seed);
  const int C = NH * HD;
  const size_t nqkv = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HD;
  Vec qkv = random_vec(rng, nqkv, -1.5f, 1.5f);
  DVec qkvd = to_double(qkv);

  // Outputs and scratch start as NaN: every element must be written, and nothing stale may be read.
  Vec out(static_cast<size_t>(B) * T * C, kNaN), lse(static_cast<size_t>(B) * NH * T, kNaN);
  Vec scratch(dtrain::kernels::attention_scratch_floats(B, T, NH), kNaN);
  k::attention_forward(out.data(), lse.data(), scratch.data(), qkv.data(), ds, B, T, NH, NKV, HD);
  const AttRef ref = ref_attention(qkvd, B, T, NH, NKV, HD, doc, window);
  // sgemm forms the scores (HD products) and the outputs (up to T weighted values), in an order the
  // BLAS picks. A score s = scale q.k is off by at most (HD + 1) u scale sum|q||k| <= (HD + 1) u
  // sqrt(HD) 1.5^2 =: ds (inputs in [-1.5, 1.5]); a probability exp(s - max) / z then by 2 ds relative
  // (the score and the row's max), plus the fast exp (2.5 u), the row sum z (T + 1 u: positive terms)
  // and the division; the output sums up to T of them: |out - ref| <= (2 T + 6 + 2 ds / u) u sum p |v|,
  // and the log-sum-exp max + log z is off by ds + (T + 6) u + u |lse|.
  const double ds_in_u = (HD + 1) * std::sqrt(static_cast<double>(HD)) * 2.25;
  DVec with_abs_v = qkvd;  // sum p |v|: the reference's outputs over the absolute values of v
  const int W = (NH + 2 * NKV) * HD;
  for (size_t t = 0; t < with_abs_v.size() / W; ++t)
    for (int c = C + NKV * HD; c < W; ++c) with_abs_v[t * W + c] = std::fabs(with_abs_v[t * W + c]);
  check_bounded("attention out", out, ref.out, ref_attention(with_abs_v, B, T, NH, NKV, HD, doc, window).out, 2 * T + 6 + 2 * ds_in_u);
  DVec lse_scale(ref.lse.size());
  for (size_t i = 0; i < lse_scale.size(); ++i) lse_scale[i] = std::max(1.0, std::fabs(ref.lse[i]));
  check_bounded("attention log-sum-exp", lse, ref.lse, lse_scale, T + 7 + ds_in_u);

  const DVec R = to_double(random_vec(rng, out.size()));
  const Vec Rf(R.begin(), R.end());
  Vec dqkv(nqkv, kNaN);
  k::attention_backward(dqkv.data(), scratch.data(), Rf.data(), out.data(), lse.data(), qkv.data(), ds, B, T, NH, NKV, HD);
  auto loss = [&] { return dot(ref_attention(qkvd, B, T, NH, NKV, HD, doc, window).out, R); };
  check_grad("attention dqkv (=)", loss, qkvd, dqkv, rng, fd_limit);

  // Determinism: a second run (dirty scratch, dirty outputs) reproduces every bit.
  Vec out2(out.size(), 7.0f), lse2(lse.size(), 7.0f), dqkv2(nqkv, 7.0f);
  k::attention_forward(out2.data(), lse2.data(), scratch.data(), qkv.data(), ds, B, T, NH, NKV, HD);
  k::attention_backward(dqkv2.data(), scratch.data(), Rf.data(), out2.data(), lse2.data(), qkv.data(), ds, B, T, NH, NKV, HD);
  CHECK(std::memcmp(out.data(), out2.data(), out.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(lse.data(), lse2.data(), lse.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(dqkv.data(), dqkv2.data(), dqkv.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("host attention forward/backward vs double reference", "[kernels]") {
  SECTION("small: every element of dqkv") { run_attention_check(2, 7, 2, 2, 4, 100000, 404); }
  SECTION("single token") { run_attention_check(1, 1, 3, 3, 5, 100000, 405); }
  SECTION("T = 133 crosses the 128-row block boundary (sampled dqkv)") { run_attention_check(1, 133, 2, 2, 3, 400, 406); }
  SECTION("grouped-query: 6 query heads on 2 key/value heads (dK, dV sum over 3 heads)") {
    run_attention_check(2, 9, 6, 2, 4, 100000, 407);
  }
  SECTION("multi-query: 4 query heads on one key/value head") { run_attention_check(1, 11, 4, 1, 3, 100000, 408); }
}

namespace {

// Document starts (B,T) of samples whose documents have the given lengths (each sample's last document
// runs to its end).
std::vector<int> packed_documents(int T, const std::vector<std::vector<int>>& lengths) {
  std::vector<int> ds;
  for (const auto& sample : lengths) {
    int start = 0, next = 0;
    std::size_t d = 0;
    for (int t = 0; t < T; ++t) {
      if (t == next) start = t, next = d < sample.size() ? t + sample[d++] : T;
      ds.push_back(start);
    }
  }
  return ds;
}

}  // namespace

TEST_CASE("host attention with packed documents vs a block-diagonal double reference", "[kernels][documents]") {
  SECTION("two samples, one-token documents, grouped-query") {
    run_attention_check(2, 9, 4, 2, 4, 100000, 409, packed_documents(9, {{3, 1, 5}, {1, 1, 7}}));
  }
  SECTION("T = 133: a document across the 128-row block boundary, one starting in the second block (sampled dqkv)") {
    run_attention_check(1, 133, 2, 2, 3, 400, 410, packed_documents(133, {{50, 1, 90}}));
  }
}

TEST_CASE("host attention with a sliding window vs a double reference", "[kernels][window]") {
  SECTION("window 3 over 9 rows, grouped-query: every element of dqkv") { run_attention_check(2, 9, 4, 2, 4, 100000, 411, {}, 3); }
  SECTION("window 1: each row sees itself only") { run_attention_check(1, 6, 2, 2, 3, 100000, 412, {}, 1); }
  SECTION("T = 300, window 70: the 128-row blocks start inside the window (sampled dqkv)") {
    run_attention_check(1, 300, 2, 1, 3, 400, 413, {}, 70);
  }
  SECTION("a window and packed documents together: each row's first key is the later of the two") {
    run_attention_check(2, 140, 2, 2, 3, 400, 414, packed_documents(140, {{20, 100, 20}, {135, 5}}), 30);
  }
}

TEST_CASE("host embedding with position ids reset at packed documents vs double reference", "[kernels][documents]") {
  std::mt19937 rng(111);
  const int B = 2, T = 5, C = 7, V = 12, P = 5;
  const std::vector<int> tokens = {3, 4, 3, 8, 0, 11, 5, 3, 9, 2}, positions = {0, 1, 0, 1, 2, 0, 0, 1, 2, 3};
  const Vec wte = random_vec(rng, V * C), wpe = random_vec(rng, P * C);
  DVec wte_d = to_double(wte), wpe_d = to_double(wpe);
  Vec out(B * T * C, kNaN);
  k::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), positions.data(), 0, B, T, C, V);
  check_close("embedding_forward with positions", out, ref_embedding(tokens, wte_d, &wpe_d, 0, B, T, C, V, &positions), kFwdRtol, kFwdAtol);
  const DVec R = to_double(random_vec(rng, B * T * C));
  const Vec Rf(R.begin(), R.end());
  const Vec dwte0 = random_vec(rng, V * C), dwpe0 = random_vec(rng, P * C);
  Vec dwte = dwte0, dwpe = dwpe0;
  k::embedding_backward(dwte.data(), dwpe.data(), Rf.data(), tokens.data(), positions.data(), 0, B, T, C, V, P);
  auto loss = [&] { return dot(ref_embedding(tokens, wte_d, &wpe_d, 0, B, T, C, V, &positions), R); };
  check_grad("embedding dwpe with positions (+= onto pre-filled)", loss, wpe_d, dwpe, rng, 100000, &dwpe0);
  for (int c = 0; c < C; ++c) CHECK(dwpe[4 * C + c] == dwpe0[4 * C + c]);  // no token sits at position 4
}

// ================================================================= rmsnorm

namespace {

struct RmsRef {
  DVec out, rstd;
};
RmsRef ref_rmsnorm(const DVec& x, const DVec& w, int N, int C, double eps) {
  RmsRef r{DVec(x.size()), DVec(static_cast<size_t>(N))};
  for (int i = 0; i < N; ++i) {
    double ms = 0.0;
    for (int c = 0; c < C; ++c) ms += x[static_cast<size_t>(i) * C + c] * x[static_cast<size_t>(i) * C + c];
    const double s = 1.0 / std::sqrt(ms / C + eps);
    for (int c = 0; c < C; ++c) r.out[static_cast<size_t>(i) * C + c] = x[static_cast<size_t>(i) * C + c] * s * w[c];
    r.rstd[i] = s;
  }
  return r;
}

}  // namespace

TEST_CASE("host rmsnorm forward/backward vs double reference", "[kernels]") {
  std::mt19937 rng(212);
  const int N = 6, C = 37;
  const double eps = 1e-6;
  Vec x = random_vec(rng, N * C, -2.0f, 3.0f), w = random_vec(rng, C, 0.5f, 1.5f);
  DVec xd = to_double(x), wd = to_double(w);
  Vec out(N * C, kNaN), rstd(N, kNaN);
  k::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, static_cast<float>(eps));
  const RmsRef ref = ref_rmsnorm(xd, wd, N, C, eps);
  check_close("rmsnorm out", out, ref.out, kFwdRtol, kFwdAtol);
  check_close("rmsnorm rstd", rstd, ref.rstd, kFwdRtol, kFwdAtol);

  const DVec R = to_double(random_vec(rng, N * C));
  const Vec Rf(R.begin(), R.end());
  const Vec dinp0 = random_vec(rng, N * C), dw0 = random_vec(rng, C);  // both accumulated (+=)
  Vec dinp = dinp0, dw = dw0;
  k::rmsnorm_backward(dinp.data(), dw.data(), Rf.data(), x.data(), w.data(), rstd.data(), N, C);
  auto loss = [&] { return dot(ref_rmsnorm(xd, wd, N, C, eps).out, R); };
  check_grad("rmsnorm dinp (+= onto pre-filled)", loss, xd, dinp, rng, 100000, &dinp0);
  check_grad("rmsnorm dweight (+= onto pre-filled)", loss, wd, dw, rng, 100000, &dw0);
}

// ================================================================= rope

namespace {

// Llama 3.1's remapping of one frequency, as Meta's reference (apply_scaling) writes it, in double.
double llama3_scaled(double freq, const dtrain::kernels::RopeFrequencies& f) {
  const double low_wavelen = f.original_context / f.low_freq_factor, high_wavelen = f.original_context / f.high_freq_factor;
  const double wavelen = 2 * M_PI / freq;
  if (wavelen < high_wavelen) return freq;
  if (wavelen > low_wavelen) return freq / f.factor;
  const double smooth = (f.original_context / wavelen - f.low_freq_factor) / (f.high_freq_factor - f.low_freq_factor);
  return (1 - smooth) * freq / f.factor + smooth * freq;
}

// Rows (B,T,W) at positions t0 + t; heads [0,H) of HD dims; pairs (i, i + R/2), angle (t0 + t) *
// base^(-2i/R) (remapped when f scales), in double.
DVec ref_rope(const DVec& x, int B, int T, int W, int H, int HD, int R, const dtrain::kernels::RopeFrequencies& f, int t0,
              const std::vector<int>* positions = nullptr) {
  DVec y = x;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < R / 2; ++i) {
          const double freq = std::pow(static_cast<double>(f.base), -2.0 * i / R);
          const double pos = positions ? (*positions)[static_cast<size_t>(b) * T + t] : t0 + t;
          const double angle = pos * (f.factor == 0 ? freq : llama3_scaled(freq, f));
          const size_t at = (static_cast<size_t>(b) * T + t) * W + static_cast<size_t>(h) * HD + i;
          y[at] = x[at] * std::cos(angle) - x[at + R / 2] * std::sin(angle);
          y[at + R / 2] = x[at + R / 2] * std::cos(angle) + x[at] * std::sin(angle);
        }
  return y;
}

void run_rope_check(int B, int T, int H, int HD, int R, int W, dtrain::kernels::RopeFrequencies f, unsigned seed, int t0 = 0,
                    const std::vector<int>& positions = {}) {
  const std::vector<int>* pos = positions.empty() ? nullptr : &positions;
  const int* p = positions.empty() ? nullptr : positions.data();
  std::mt19937 rng(seed);
  const size_t n = static_cast<size_t>(B) * T * W;
  const Vec x = random_vec(rng, n);
  DVec xd = to_double(x);
  Vec y = x;
  k::rope_forward(y.data(), B, T, W, H, HD, R, f, t0, p);
  const DVec ref = ref_rope(xd, B, T, W, H, HD, R, f, t0, pos);
  check_close("rope_forward", y, ref, kFwdRtol, kFwdAtol);
  for (size_t i = 0; i < n; ++i) {  // dims past R of a head, and columns past the H heads, stay bit-identical
    const size_t col = i % static_cast<size_t>(W);
    if (col >= static_cast<size_t>(H) * HD || static_cast<int>(col % HD) >= R) CHECK(y[i] == x[i]);
  }
  const DVec Rw = to_double(random_vec(rng, n));
  Vec dx(Rw.begin(), Rw.end());
  k::rope_backward(dx.data(), B, T, W, H, HD, R, f, t0, p);
  auto loss = [&] { return dot(ref_rope(xd, B, T, W, H, HD, R, f, t0, pos), Rw); };
  check_grad("rope dx (in place)", loss, xd, dx, rng);
}

dtrain::kernels::RopeFrequencies plain(float base) {
  dtrain::kernels::RopeFrequencies f;
  f.base = base;
  return f;
}

}  // namespace

TEST_CASE("host rope forward/backward vs double reference", "[kernels]") {
  SECTION("whole heads, the query and key heads of a packed row (v columns untouched)") { run_rope_check(2, 13, 3, 8, 8, 4 * 8, plain(10000), 213); }
  SECTION("partial rotary (6 of 10 dims), Llama 3 base") { run_rope_check(1, 9, 2, 10, 6, 3 * 10, plain(500000), 214); }
  SECTION("a chunk of a sequence at positions 40.. (context parallelism)") { run_rope_check(2, 7, 3, 8, 8, 4 * 8, plain(10000), 216, 40); }
  SECTION("position ids reset at packed documents' starts (t0 ignored)") {
    run_rope_check(2, 7, 3, 8, 8, 4 * 8, plain(10000), 218, 40, {0, 1, 2, 0, 1, 0, 1, 0, 1, 2, 3, 4, 5, 6});
  }
  SECTION("Llama 3.1's scaling, its three cases among 16 pairs") {
    // Base 500000 over 32 dims: wavelengths 2 pi 500000^(i/16), 6.3 to 1.1e6. With an original context of
    // 8192 pairs i <= 7 (wavelength <= 1948) are kept, i = 8 (4423) is blended, i >= 9 (>= 10040) scaled.
    dtrain::kernels::RopeFrequencies f = plain(500000);
    f.factor = 8, f.low_freq_factor = 1, f.high_freq_factor = 4, f.original_context = 8192;
    run_rope_check(1, 5, 2, 32, 32, 3 * 32, f, 217, 40);
  }
}

// ================================================================= swiglu

TEST_CASE("host swiglu forward/backward vs double reference", "[kernels]") {
  std::mt19937 rng(215);
  const int N = 5, F = 19;
  const Vec x = random_vec(rng, 2 * N * F, -4.0f, 4.0f);
  DVec xd = to_double(x);
  auto ref = [&](const DVec& in) {
    DVec out(static_cast<size_t>(N) * F);
    for (int i = 0; i < N; ++i)
      for (int f = 0; f < F; ++f) {
        const double g = in[static_cast<size_t>(i) * 2 * F + f], u = in[static_cast<size_t>(i) * 2 * F + F + f];
        out[static_cast<size_t>(i) * F + f] = g / (1.0 + std::exp(-g)) * u;
      }
    return out;
  };
  Vec out(static_cast<size_t>(N) * F, kNaN);
  k::swiglu_forward(out.data(), x.data(), N, F);
  check_close("swiglu_forward", out, ref(xd), kFwdRtol, kFwdAtol);
  const DVec R = to_double(random_vec(rng, out.size()));
  const Vec Rf(R.begin(), R.end());
  Vec dinp(x.size(), kNaN);  // written (=)
  k::swiglu_backward(dinp.data(), x.data(), Rf.data(), N, F);
  auto loss = [&] { return dot(ref(xd), R); };
  check_grad("swiglu dinp (=)", loss, xd, dinp, rng);
}

// ================================================================= gelu

TEST_CASE("host gelu forward/backward vs double reference", "[kernels]") {
  std::mt19937 rng(505);
  Vec x = random_vec(rng, 1001, -5.0f, 5.0f);
  x[0] = 0.0f;
  x[1] = 1e-4f;
  x[2] = -1e-4f;
  DVec xd = to_double(x);
  Vec out(x.size(), kNaN);
  k::gelu_forward(out.data(), x.data(), static_cast<long>(x.size()));
  DVec ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) ref[i] = ref_gelu(xd[i]);
  // Elementwise: the bound is relative per element (atol only a tiny floor for gelu(0) = 0).
  check_close("gelu_forward", out, ref, kFwdRtol, 1e-12);

  const DVec R = to_double(random_vec(rng, x.size()));
  const Vec Rf(R.begin(), R.end());
  Vec dinp(x.size(), kNaN);   // written (=)
  k::gelu_backward(dinp.data(), x.data(), Rf.data(), static_cast<long>(x.size()));
  // Elements are independent, so the FD of sum_i R_i gelu(x_i) w.r.t. x_i needs only element i.
  DVec fd(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    fd[i] = R[i] * (ref_gelu(xd[i] + kFdStep) - ref_gelu(xd[i] - kFdStep)) / (2.0 * kFdStep);
  check_close("gelu dinp (vs finite differences)", dinp, fd, kGradRtol, kGradAtol);

  SECTION("saturated inputs stay finite") {
    const Vec big = {-100.0f, -20.0f, 20.0f, 100.0f};
    const Vec one(4, 1.0f);
    Vec o(4), d(4);
    k::gelu_forward(o.data(), big.data(), 4);
    k::gelu_backward(d.data(), big.data(), one.data(), 4);
    for (int i = 0; i < 4; ++i) {
      CHECK(std::isfinite(o[i]));
      CHECK(std::isfinite(d[i]));
    }
    CHECK(std::fabs(o[0]) < 1e-30f);
    CHECK(o[3] == 100.0f);
    CHECK(std::fabs(d[0]) < 1e-30f);
    CHECK(d[3] == 1.0f);
  }
}

// ================================================================= residual

TEST_CASE("host residual forward", "[kernels]") {
  std::mt19937 rng(606);
  const int n = 10007;
  Vec a = random_vec(rng, n), b = random_vec(rng, n);
  DVec ad = to_double(a), bd = to_double(b);
  Vec out(n, kNaN);
  k::residual_forward(out.data(), a.data(), b.data(), n);
  DVec ref(n);
  for (int i = 0; i < n; ++i) ref[i] = ad[i] + bd[i];
  check_close("residual_forward", out, ref, kFwdRtol, kFwdAtol);
}

// ================================================================= cross entropy

TEST_CASE("host cross-entropy chain and backward vs double reference", "[kernels]") {
  std::mt19937 rng(707);
  const int N = 5, V = 37;

  for (const int vocab_start : {0, 100}) {
    SECTION("vocab_start = " + std::to_string(vocab_start)) {
      Vec logits = random_vec(rng, N * V, -4.0f, 4.0f);
      DVec ld = to_double(logits);
      // With vocab_start = 100, targets 3 and 137 are outside [100, 137): target logit 0, no -1.
      const std::vector<int> targets = vocab_start == 0 ? std::vector<int>{0, 36, 5, 17, 5}
                                                        : std::vector<int>{100, 3, 136, 137, 118};
      const XentOut o = run_xent(logits, targets, vocab_start, N, V);
      const XentRef ref = ref_xent(ld, targets, vocab_start, N, V);
      check_close("xent_row_max", o.max, ref.max, 0.0, 0.0);
      check_close("xent_row_sum_exp", o.sum, ref.sum, kFwdRtol, 0.0);
      check_close("xent lse", o.lse, ref.lse, kFwdRtol, kFwdAtol);
      check_close("xent_target_logit", o.target, ref.target, 0.0, 0.0);
      if (vocab_start != 0) {
        CHECK(o.target[1] == 0.0f);
        CHECK(o.target[3] == 0.0f);
      }
      DVec loss_ref(N);
      Vec loss(N);
      for (int i = 0; i < N; ++i) {
        loss[i] = o.lse[i] - o.target[i];
        loss_ref[i] = ref.lse[i] - ref.target[i];
      }
      check_close("xent loss", loss, loss_ref, kFwdRtol, kFwdAtol);

      const DVec dloss = to_double(random_vec(rng, N, 0.1f, 1.0f));
      const Vec dlossf(dloss.begin(), dloss.end());
      Vec dlogits(N * V, kNaN);
      k::xent_backward(dlogits.data(), logits.data(), o.lse.data(), targets.data(), dlossf.data(), vocab_start, N, V);
      auto total = [&] {
        const XentRef r = ref_xent(ld, targets, vocab_start, N, V);
        double s = 0.0;
        for (int i = 0; i < N; ++i) s += dloss[i] * (r.lse[i] - r.target[i]);
        return s;
      };
      check_grad("xent dlogits", total, ld, dlogits, rng);

      // In place (dlogits == logits) gives the same bits.
      Vec inplace = logits;
      k::xent_backward(inplace.data(), inplace.data(), o.lse.data(), targets.data(), dlossf.data(), vocab_start, N, V);
      CHECK(inplace == dlogits);
    }
  }
}

TEST_CASE("host masked token loss and its per-row weights", "[kernels][documents]") {
  // Rows of a fine-tuning batch: masked rows (0) add nothing to the summed loss and get no gradient
  // weight; the others add their loss once. lse is written for every row.
  const int N = 4;
  const Vec row_max = {1.0f, 2.0f, 0.5f, -1.0f}, row_sum = {2.0f, 3.0f, 1.5f, 4.0f}, target = {0.25f, 1.5f, -0.5f, -2.0f};
  const Vec mask = {1.0f, 0.0f, 1.0f, 0.0f};
  Vec lse(N, kNaN);
  double sum = 10.0;  // += onto what is there
  k::xent_loss(&sum, lse.data(), row_max.data(), row_sum.data(), target.data(), mask.data(), N);
  double want = 10.0;
  for (int i = 0; i < N; ++i) {
    CHECK(lse[i] == row_max[i] + std::log(row_sum[i]));
    if (mask[i] != 0.0f) want += static_cast<double>(lse[i]) - target[i];
  }
  CHECK(sum == want);
  double unmasked = 0.0;
  k::xent_loss(&unmasked, lse.data(), row_max.data(), row_sum.data(), target.data(), nullptr, N);
  CHECK(unmasked > want - 10.0);  // the masked rows' losses are positive here: without the mask they count
  // A NaN in a masked row still reaches the sum (a diverged forward is never hidden by a mask).
  Vec bad_max = row_max;
  bad_max[1] = kNaN;
  double nan_sum = 0.0;
  k::xent_loss(&nan_sum, lse.data(), bad_max.data(), row_sum.data(), target.data(), mask.data(), N);
  CHECK(std::isnan(nan_sum));
  Vec w(N, kNaN);
  k::loss_weights(w.data(), mask.data(), 0.125f, N);
  CHECK(w == Vec{0.125f, 0.0f, 0.125f, 0.0f});
  k::loss_weights(w.data(), nullptr, 0.5f, N);
  CHECK(w == Vec{0.5f, 0.5f, 0.5f, 0.5f});
}

TEST_CASE("host cross-entropy over a vocabulary split across two ranks", "[kernels]") {
  // Two simulated ranks hold columns [0, V) and [V, 2V) of the full (N, 2V) logits. Combining their
  // partial max/sum/target the way the model does and running each rank's backward with the global lse
  // must give the gradient of the full double loss.
  std::mt19937 rng(808);
  const int N = 4, V = 21, VF = 2 * V;
  const Vec full = random_vec(rng, N * VF, -3.0f, 3.0f);
  DVec fulld = to_double(full);
  const std::vector<int> targets = {3, 21, 20, 41};   // both halves, both sides of the split, last column
  const DVec dloss = to_double(random_vec(rng, N, 0.1f, 1.0f));
  const Vec dlossf(dloss.begin(), dloss.end());

  Vec part[2] = {Vec(N * V), Vec(N * V)};
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < N; ++i)
      for (int v = 0; v < V; ++v) part[r][i * V + v] = full[i * VF + r * V + v];
  XentOut o[2] = {run_xent(part[0], targets, 0, N, V), run_xent(part[1], targets, V, N, V)};
  Vec lse(N), target(N);
  for (int i = 0; i < N; ++i) {
    const float m = std::max(o[0].max[i], o[1].max[i]);
    const float s = o[0].sum[i] * std::exp(o[0].max[i] - m) + o[1].sum[i] * std::exp(o[1].max[i] - m);
    lse[i] = m + std::log(s);
    target[i] = o[0].target[i] + o[1].target[i];
    // Exactly one rank holds each target.
    CHECK(((o[0].target[i] != 0.0f) != (o[1].target[i] != 0.0f)));
  }
  const XentRef ref = ref_xent(fulld, targets, 0, N, VF);
  check_close("split xent lse", lse, ref.lse, kFwdRtol, kFwdAtol);
  check_close("split xent target logit", target, ref.target, 0.0, 0.0);

  Vec grad(N * VF);
  for (int r = 0; r < 2; ++r) {
    Vec g(N * V, kNaN);
    k::xent_backward(g.data(), part[r].data(), lse.data(), targets.data(), dlossf.data(), r * V, N, V);
    for (int i = 0; i < N; ++i)
      for (int v = 0; v < V; ++v) grad[i * VF + r * V + v] = g[i * V + v];
  }
  auto total = [&] {
    const XentRef rr = ref_xent(fulld, targets, 0, N, VF);
    double s = 0.0;
    for (int i = 0; i < N; ++i) s += dloss[i] * (rr.lse[i] - rr.target[i]);
    return s;
  };
  check_grad("split xent dlogits", total, fulld, grad, rng);
}

TEST_CASE("host cross-entropy on a GPT-2-wide vocabulary row", "[kernels]") {
  std::mt19937 rng(909);
  const int N = 2, V = 50304;
  std::normal_distribution<float> dist(0.0f, 3.0f);
  Vec logits(static_cast<size_t>(N) * V);
  for (auto& x : logits) x = dist(rng);
  const std::vector<int> targets = {50303, 7};
  const XentOut o = run_xent(logits, targets, 0, N, V);
  const XentRef ref = ref_xent(to_double(logits), targets, 0, N, V);
  check_close("wide xent row_max", o.max, ref.max, 0.0, 0.0);
  check_close("wide xent row_sum_exp", o.sum, ref.sum, kFwdRtol, 0.0);
  check_close("wide xent lse", o.lse, ref.lse, kFwdRtol, 0.0);
  // Backward: softmax - onehot, scaled by dloss, against the double formula.
  const Vec dloss = {1.0f, 0.5f};
  Vec g(logits.size());
  k::xent_backward(g.data(), logits.data(), o.lse.data(), targets.data(), dloss.data(), 0, N, V);
  DVec gref(logits.size());
  for (int i = 0; i < N; ++i)
    for (int v = 0; v < V; ++v)
      gref[static_cast<size_t>(i) * V + v] =
          (std::exp(static_cast<double>(logits[static_cast<size_t>(i) * V + v]) - ref.lse[i]) - (v == targets[i])) *
          dloss[i];
  check_close("wide xent dlogits", g, gref, kGradRtol, kGradAtol);
  // softmax - onehot sums to 0 over the row: each probability is off by the lse's error (83 u from the
  // sum's blocks plus u |lse|, |lse| < 32 here) and its exp and rounding (3.5 u), so the row by at most
  // 120 u (7e-6) of the probabilities' sum, 1.
  double row_sum = 0.0;
  for (int v = 0; v < V; ++v) row_sum += g[v];
  CHECK(std::fabs(row_sum) < 120 * 0x1p-24);
}

TEST_CASE("host cross-entropy propagates a NaN logit into the loss", "[kernels]") {
  // A diverged model must show a NaN loss, not a silently finite one: a NaN of either sign in a row
  // makes its max, lse and gradient row NaN.
  const int N = 2, V = 40;
  for (const float nan : {kNaN, std::copysign(kNaN, -1.0f)}) {
    Vec logits(N * V, 0.5f);
    logits[V + 17] = nan;   // row 1 only
    const std::vector<int> targets = {3, 4};
    const XentOut o = run_xent(logits, targets, 0, N, V);
    CHECK(std::isfinite(o.lse[0]));
    CHECK(std::isnan(o.max[1]));
    CHECK(std::isnan(o.lse[1]));
    const Vec dloss(N, 1.0f);
    Vec g(N * V);
    k::xent_backward(g.data(), logits.data(), o.lse.data(), targets.data(), dloss.data(), 0, N, V);
    CHECK(std::isfinite(g[0]));
    CHECK(std::isnan(g[V]));
  }
}

// ================================================================= optimizer

TEST_CASE("host sum_squares and scale", "[kernels]") {
  std::mt19937 rng(1001);
  const long n = 10007;
  const Vec x = random_vec(rng, n, -3.0f, 3.0f);
  double ref = 0.0;
  for (float v : x) ref += static_cast<double>(v) * v;
  // sum_squares adds to the caller's sum (here from zero).
  auto squares = [&](long count) {
    double s = 0.0;
    k::sum_squares(&s, x.data(), count);
    return s;
  };
  // Double accumulation of exact float squares (positive terms): both sums within n u_double (u_double
  // = 2^-53) of the exact one relative, so within 2 n 2^-53 = 2.2e-12 of each other.
  CHECK(std::fabs(squares(n) - ref) <= 2.0 * n * 0x1p-53 * ref);
  CHECK(squares(0) == 0.0);
  CHECK(squares(3) == static_cast<double>(x[0]) * x[0] + static_cast<double>(x[1]) * x[1] + static_cast<double>(x[2]) * x[2]);
  double running = 0.5;  // added to, not overwritten
  k::sum_squares(&running, x.data(), 1);
  CHECK(running == 0.5 + static_cast<double>(x[0]) * x[0]);
}

TEST_CASE("host adamw_update: one and two steps vs double reference", "[kernels]") {
  std::mt19937 rng(1102);
  const long n = 1003;
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  Vec p = random_vec(rng, n), m(n, 0.0f), v(n, 0.0f);
  DVec pd = to_double(p), md(n, 0.0), vd(n, 0.0);
  for (int t = 1; t <= 2; ++t) {
    const Vec g = random_vec(rng, n);
    const dtrain::kernels::AdamRun whole{0, n, 0, wd};
    const float one = 1.0f;
    k::adamw_update(p.data(), static_cast<float*>(nullptr), m.data(), v.data(), g.data(), &one, &whole, 1, n, lr, b1, b2, eps, t);
    for (long i = 0; i < n; ++i) {
      const double gi = g[i];
      md[i] = double(b1) * md[i] + (1.0 - double(b1)) * gi;
      vd[i] = double(b2) * vd[i] + (1.0 - double(b2)) * gi * gi;
      const double mhat = md[i] / (1.0 - std::pow(double(b1), t));
      const double vhat = vd[i] / (1.0 - std::pow(double(b2), t));
      pd[i] -= double(lr) * (mhat / (std::sqrt(vhat) + double(eps)) + double(wd) * pd[i]);
    }
    // m, v: a handful of float roundings. param: the update is lr * O(1), so its float error is
    // ~lr * 1e-6 on top of the rounding of param itself (~6e-8 |param|).
    check_close("adamw m, step " + std::to_string(t), m, md, 1e-5, 1e-6);
    check_close("adamw v, step " + std::to_string(t), v, vd, 1e-5, 1e-6);
    check_close("adamw param, step " + std::to_string(t), p, pd, 2e-7, 1e-5 * lr);
  }
}

TEST_CASE("host adamw_update: grad_factor is the gradients scaled first, bit for bit", "[kernels]") {
  std::mt19937 rng(1103);
  const long n = 517;
  const float factor = 0.37f;
  const Vec g = random_vec(rng, n), p0 = random_vec(rng, n);
  Vec scaled = g;
  for (float& x : scaled) x *= factor;
  const dtrain::kernels::AdamRun whole{0, n, 0, 0.1f};
  Vec p1 = p0, m1(n, 0.1f), v1(n, 0.2f), p2 = p0, m2(n, 0.1f), v2(n, 0.2f);
  const float one = 1.0f;
  k::adamw_update(p1.data(), static_cast<float*>(nullptr), m1.data(), v1.data(), g.data(), &factor, &whole, 1, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 2);
  k::adamw_update(p2.data(), static_cast<float*>(nullptr), m2.data(), v2.data(), scaled.data(), &one, &whole, 1, n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                  2);
  CHECK(p1 == p2);
  CHECK(m1 == m2);
  CHECK(v1 == v2);
  CHECK(p1 != p0);
  // A non-finite factor (step_factor's mark of a non-finite loss or norm) leaves everything as it was.
  const Vec p_before = p1, m_before = m1, v_before = v1;
  for (const float bad : {NAN, INFINITY}) {
    k::adamw_update(p1.data(), static_cast<float*>(nullptr), m1.data(), v1.data(), g.data(), &bad, &whole, 1, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 3);
    CHECK(p1 == p_before);
    CHECK(m1 == m_before);
    CHECK(v1 == v_before);
  }
}

TEST_CASE("host step_factor: the clipping and unscaling factor, NaN for a non-finite loss or norm", "[kernels]") {
  // sums: summed token loss, squared gradient norm (of gradients carrying the loss scale).
  auto factor = [](double loss_sum, double squares, double tokens, double scale, double clip) {
    const double sums[2] = {loss_sum, squares};
    float f = -1.0f;
    k::step_factor(&f, sums, tokens, scale, clip);
    return f;
  };
  CHECK(factor(20.0, 0.25, 10.0, 1.0, 1.0) == 1.0f);                                     // norm 0.5: below the clip
  CHECK(factor(20.0, 16.0, 10.0, 1.0, 1.0) == static_cast<float>(1.0 / (4.0 + 1e-6)));   // norm 4: clipped to 1
  CHECK(factor(20.0, 16.0, 10.0, 1.0, 0.0) == 1.0f);                                     // clip 0: never
  CHECK(factor(20.0, 16.0 * 1024 * 1024, 10.0, 1024.0, 8.0) == 1.0f / 1024);             // scale divided out: norm 4 < 8
  CHECK(factor(20.0, 16.0 * 1024 * 1024, 10.0, 1024.0, 2.0) == static_cast<float>(2.0 / (4.0 + 1e-6) / 1024));
  CHECK(std::isnan(factor(INFINITY, 0.25, 10.0, 1.0, 1.0)));  // loss
  CHECK(std::isnan(factor(NAN, 0.25, 10.0, 1.0, 1.0)));
  CHECK(std::isnan(factor(20.0, INFINITY, 10.0, 1.0, 1.0)));  // norm
  CHECK(std::isnan(factor(20.0, NAN, 10.0, 1.0, 0.0)));
}
