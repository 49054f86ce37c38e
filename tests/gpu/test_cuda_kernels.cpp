// Every CUDA kernel against the host kernel of the same entry of kernel_api.inc, on random inputs, in
// fp32, bf16 and fp16. The measure is normwise: max |cuda - host| / max |host| over each output.
// Tolerances: fp32: both sides are fp32 with fp32 accumulation and differ in summation order only
// (cuBLAS vs OpenBLAS blocking, warp vs lane reductions) and in exp (CUDA expf vs the host's fast_exp,
// both within a few ulp). Two orders of a sum of K terms differ by at most 2 K u (u = 2^-24) of the
// terms' magnitudes; measured against the largest output, whose size for these zero-mean inputs is
// about sqrt(K) / 5 of a sum's magnitudes while the rounding errors, of random sign, add like a
// random walk (sqrt(2 K) u of the magnitudes), 2 (K + 16) u is a 7-sigma bound (the 16 cover the exps
// and the final roundings): tolerance<float>(K) with K the longest sum of the output (64 by default:
// C, T, the head's HD x 4; 256 for the MLP's inputs, a column sum's rows). bf16 outputs 8e-3 (two bf16 steps):
// both sides compute in fp32 and round to bf16 once, so an output differs by one rounding step (2^-8
// relative) wherever the fp32 values straddle a rounding boundary; fp32 outputs of bf16 inputs keep
// tolerance<float>. fp16 outputs (10-bit mantissa): both sides compute in fp32 and round to fp16 once,
// each rounding moving a value by at most 2^-11 of it (round to nearest; a subnormal, below 2^-14, by
// at most 2^-25). Two fp32 values a, b that straddle a rounding boundary round to neighbours one step
// apart, and a step is at most 2^-10 of the value, so of the largest output; with the fp32 values' own
// difference, |r(a) - r(b)| <= |a - r(a)| + |a - b| + |b - r(b)| <= step + |a - b|: tolerance<fp16>(K)
// = 2^-10 + tolerance<float>(K). The inputs' magnitudes (at most about 5 sigma of the scales below, 40
// for the saturated GELU) and every output stay far below fp16's 65504. A wrong index or a missing
// term shows as 1e-1 or worse.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/attention_scratch.hpp"
#include "kernels/kernels.hpp"
#include "runtime/arena.hpp"

using namespace dtrain;

namespace {

template <typename T>
std::vector<T> random_vec(std::mt19937& gen, std::size_t n, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<T> v(n);
  for (auto& x : v) x = from_float<T>(nd(gen));
  return v;
}

// Equal bit for bit (two GPU results of calls that must make the same arithmetic).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A host vector mirrored in GPU memory.
template <typename T>
class OnGpu {
 public:
  explicit OnGpu(const std::vector<T>& host) : arena_(cuda_device(), host.size() * sizeof(T)), n_(host.size()) {
    cuda_device().copy(arena_.data(), host.data(), host.size() * sizeof(T));
  }
  T* data() { return arena_.as<T>(); }
  std::vector<T> get() const {
    std::vector<T> h(n_);
    cuda_device().copy(h.data(), arena_.data(), n_ * sizeof(T));
    return h;
  }

 private:
  Arena arena_;
  std::size_t n_;
};

template <typename T>
double normwise(const std::vector<T>& got, const std::vector<T>& want) {
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = to_float(want[i]), g = to_float(got[i]);
    err = std::max(err, std::abs(g - w));
    scale = std::max(scale, std::abs(w));
    if (std::isnan(g) != std::isnan(w)) return INFINITY;
  }
  return scale > 0 ? err / scale : err;
}

template <typename T>
constexpr double tolerance(long longest_sum = 64) {
  if constexpr (std::is_same_v<T, float>)
    return 2.0 * (longest_sum + 16) * 0x1p-24;
  else if constexpr (std::is_same_v<T, bf16>)
    return 8e-3;
  else
    return 0x1p-10 + tolerance<float>(longest_sum);  // one fp16 step, plus the fp32 sums' difference
}
template <typename T>
const char* type_name() {
  return std::is_same_v<T, float> ? "fp32" : std::is_same_v<T, bf16> ? "bf16" : "fp16";
}

// Two outputs of the same arithmetic: equal bit for bit.
template <typename T>
void expect_same_bits(const std::string& what, const std::vector<T>& got, const std::vector<T>& want) {
  const bool same = got.size() == want.size() && std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0;
  std::printf("cuda vs cuda %-40s %s bit-identical: %s\n", what.c_str(), type_name<T>(), same ? "yes" : "NO");
  INFO(what << " " << type_name<T>());
  CHECK(same);
}

// Checks one output and reports the error (the note of every GPU run quotes these lines).
template <typename T>
void expect_close(const std::string& what, const std::vector<T>& got, const std::vector<T>& want, double tol = tolerance<T>()) {
  const double e = normwise(got, want);
  std::printf("cuda vs host %-40s %s max error %.2e (tolerance %.0e)\n", what.c_str(), type_name<T>(), e, tol);
  INFO(what << " " << type_name<T>() << ": normwise error " << e);
  CHECK(e <= tol);
}

// bf16 attention: both sides keep the scores and their gradient in fp32. The CUDA kernels multiply bf16
// operands on tensor cores: P rounded to bf16 for the output and dV, dS rounded to bf16 for dQ and dK,
// where the host multiplies fp32 values: one more rounding step (2^-8 relative) on out and dqkv than
// a plain bf16 output's 8e-3, so 1.6e-2. The log-sum-exp is fp32 on both sides (fp32 tolerance).
// fp16 attention: the same two roundings, to fp16: each term of the products P V, P^T dO, dS K and
// dS^T Q moves by at most 2^-11 of itself (P in [0, 1] and dS are far from fp16's overflow here). The
// terms have independent signs, and so do their rounding errors: the errors add up like the terms, to
// about 2^-11 of the product's own size, within one more fp16 step (2^-10 of the largest output) above a
// plain fp16 output's bound: 2 * 2^-10 + tolerance<float>(K). Probabilities and score gradients below
// 2^-14 (fp16's subnormals) round by at most 2^-25 absolute instead: at most 2000 such terms (dK, dV of
// T = 1000 rows for a group of 2 heads) times an operand of at most about 5 move an output by at most
// 3e-4, a third of that step for outputs of order one (the largest of each output is above 1: the first
// row of every (sample, head) is a value row itself).
template <typename T>
constexpr double attention_product_tolerance(long longest_sum) {
  if constexpr (std::is_same_v<T, float>)
    return tolerance<float>(longest_sum);
  else if constexpr (std::is_same_v<T, bf16>)
    return 1.6e-2;
  else
    return 2 * 0x1p-10 + tolerance<float>(longest_sum);
}

// A layer and its GELU fused on the GPU (cuBLASLt's epilogue, bf16 and fp16) round once where the host's
// two kernels round twice (the layer's output to KT, then the GELU's): one more rounding step of the
// largest output, 2^-8 (bf16) or 2^-10 (fp16), beyond a plain output's tolerance. fp32 runs the two
// kernels on both sides (cuBLASLt's GELU derivative was 9.6e-6 off, beyond fp32's reordered sums).
template <typename T>
constexpr double fused_gelu_tolerance(long longest_sum) {
  if constexpr (std::is_same_v<T, float>)
    return tolerance<float>(longest_sum);
  else if constexpr (std::is_same_v<T, bf16>)
    return tolerance<bf16>() + 0x1p-8;
  else
    return tolerance<fp16>(longest_sum) + 0x1p-10;
}

// Sizes: B samples of T tokens, C channels in NH heads, F MLP width, V vocabulary rows.
constexpr int B = 2, T = 64, NH = 4, HD = 16, C = NH * HD, F = 4 * C, V = 100;
constexpr long N = static_cast<long>(B) * T;

template <typename KT>
void check_all_kernels() {
  const auto& h = kernels::kernel_table<KT>(kernels::Backend::host);
  const auto& g = kernels::kernel_table<KT>(kernels::Backend::cuda);
  std::mt19937 gen(2024);
  std::uniform_int_distribution<int> tok(0, 2 * V - 1);  // half the tokens outside this rank's vocabulary slice
  std::vector<int> tokens(static_cast<std::size_t>(N));
  for (auto& t : tokens) t = tok(gen);
  OnGpu<int> tokens_d(tokens);
  const int vocab_start = V / 2;

  SECTION("embedding") {
    // The test's tokens; then tokens of which 60% are one row of the slice (a frequent token: a run of
    // ~1,800 positions in the backward's sort), at 64 columns (16-byte packs) and at 30 (not whole packs:
    // element by element). The backward sums a run over eight warps and adds the run's sum to the row
    // once where the host adds each token in order: sums of up to `rows` terms in two orders.
    struct Case {
      int B, T, C, V;
      double frequent;  // the share of tokens that are the row vocab_start + 7
    };
    for (const Case& k : {Case{B, T, C, V, 0.0}, Case{3, 1000, 64, 300, 0.6}, Case{2, 500, 30, 300, 0.6}}) {
      const long rows = static_cast<long>(k.B) * k.T;
      const int start = k.V / 2;
      std::vector<int> toks = tokens;
      if (k.frequent > 0) {
        std::uniform_int_distribution<int> any(0, 2 * k.V - 1);
        std::bernoulli_distribution hot(k.frequent);
        toks.resize(static_cast<std::size_t>(rows));
        for (auto& t : toks) t = hot(gen) ? start + 7 : any(gen);
      }
      OnGpu<int> toks_d(toks);
      auto wte = random_vec<KT>(gen, k.V * k.C), wpe = random_vec<KT>(gen, k.T * k.C), dout = random_vec<KT>(gen, rows * k.C);
      std::vector<KT> out(rows * k.C);
      std::vector<float> dwte(k.V * k.C, 0.5f), dwpe(k.T * k.C, -0.25f);
      OnGpu<KT> wte_d(wte), wpe_d(wpe), out_d(out), dout_d(dout);
      OnGpu<float> dwte_d(dwte), dwpe_d(dwpe);
      const std::string what = k.frequent > 0 ? " (" + std::to_string(rows) + " tokens, " + std::to_string(k.C) + " columns, 60% one)" : "";
      h.embedding_forward(out.data(), toks.data(), wte.data(), wpe.data(), nullptr, start, k.B, k.T, k.C, k.V);
      g.embedding_forward(out_d.data(), toks_d.data(), wte_d.data(), wpe_d.data(), nullptr, start, k.B, k.T, k.C, k.V);
      expect_close("embedding_forward" + what, out_d.get(), out);
      h.embedding_backward(dwte.data(), dwpe.data(), dout.data(), toks.data(), nullptr, start, k.B, k.T, k.C, k.V, k.T);
      g.embedding_backward(dwte_d.data(), dwpe_d.data(), dout_d.data(), toks_d.data(), nullptr, start, k.B, k.T, k.C, k.V, k.T);
      expect_close("embedding_backward dwte" + what, dwte_d.get(), dwte, tolerance<float>(rows));
      expect_close("embedding_backward dwpe" + what, dwpe_d.get(), dwpe);
      // Position ids reset at packed documents' starts (every 7th, 50th or 200th token): the position
      // embedding's gradient is the sorted sum keyed by position, up to `rows` terms a row.
      for (const int doc : {7, 50, 200}) {
        std::vector<int> pos(static_cast<std::size_t>(rows));
        for (long r = 0; r < rows; ++r) pos[static_cast<std::size_t>(r)] = static_cast<int>((r % k.T) % doc);
        OnGpu<int> pos_d(pos);
        const std::string w = what + " (positions reset every " + std::to_string(doc) + ")";
        h.embedding_forward(out.data(), toks.data(), wte.data(), wpe.data(), pos.data(), start, k.B, k.T, k.C, k.V);
        g.embedding_forward(out_d.data(), toks_d.data(), wte_d.data(), wpe_d.data(), pos_d.data(), start, k.B, k.T, k.C, k.V);
        expect_close("embedding_forward" + w, out_d.get(), out);
        h.embedding_backward(dwte.data(), dwpe.data(), dout.data(), toks.data(), pos.data(), start, k.B, k.T, k.C, k.V, k.T);
        g.embedding_backward(dwte_d.data(), dwpe_d.data(), dout_d.data(), toks_d.data(), pos_d.data(), start, k.B, k.T, k.C, k.V, k.T);
        expect_close("embedding_backward dwpe" + w, dwpe_d.get(), dwpe, tolerance<float>(rows));
      }
    }
  }
  SECTION("layernorm") {
    // The test's rows, then 3000 rows of 40 columns (the backward's 94 splits of 32 rows, a part-filled
    // last one); rows of 30 columns, not a whole number of 16-byte packs: the element-by-element path;
    // 3000 rows of 768 (several packs a lane, GPT-2's width); rows of 1100, wider than the fused
    // backward takes: the input gradient, then the column sums (6 splits of 500 rows).
    for (const auto& [rows, cols] : {std::pair<long, int>{N, C}, std::pair<long, int>{3000, 40}, std::pair<long, int>{500, 30},
                                     std::pair<long, int>{3000, 768}, std::pair<long, int>{3000, 1100}}) {
      auto x = random_vec<KT>(gen, rows * cols, 2.0f), w = random_vec<KT>(gen, cols), b = random_vec<KT>(gen, cols);
      auto dout = random_vec<KT>(gen, rows * cols), dinp = random_vec<KT>(gen, rows * cols);  // dinp: accumulated into
      std::vector<KT> out(rows * cols);
      std::vector<float> mean(rows), rstd(rows), dw(cols, 0.1f), db(cols, 0.2f);
      OnGpu<KT> x_d(x), w_d(w), b_d(b), out_d(out), dout_d(dout), dinp_d(dinp);
      OnGpu<float> mean_d(mean), rstd_d(rstd), dw_d(dw), db_d(db);
      const std::string what = rows == N ? "" : " (" + std::to_string(rows) + "x" + std::to_string(cols) + ")";
      h.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, cols, 1e-5f);
      g.layernorm_forward(out_d.data(), mean_d.data(), rstd_d.data(), x_d.data(), w_d.data(), b_d.data(), rows, cols, 1e-5f);
      expect_close("layernorm_forward out" + what, out_d.get(), out);
      expect_close("layernorm_forward mean" + what, mean_d.get(), mean);
      expect_close("layernorm_forward rstd" + what, rstd_d.get(), rstd);
      h.layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, cols);
      g.layernorm_backward(dinp_d.data(), dw_d.data(), db_d.data(), dout_d.data(), x_d.data(), w_d.data(), mean_d.data(), rstd_d.data(),
                           rows, cols);
      expect_close("layernorm_backward dinp" + what, dinp_d.get(), dinp);
      expect_close("layernorm_backward dweight" + what, dw_d.get(), dw, tolerance<float>(rows));  // column sums over the rows
      expect_close("layernorm_backward dbias" + what, db_d.get(), db, tolerance<float>(rows));
      // The residual add before the norm, in place (res = x + y into x): against the host's two kernels,
      // and bit for bit against this GPU's own residual_forward, then layernorm_forward (the one-pass
      // kernel rounds the sum to KT before the norm reads it, as the two kernels do through memory).
      auto y = random_vec<KT>(gen, rows * cols);
      std::vector<KT> res = x;
      OnGpu<KT> y_d(y), res_d(x), res2_d(x), out2_d(out);
      OnGpu<float> mean2_d(mean), rstd2_d(rstd);
      h.residual_layernorm_forward(res.data(), out.data(), mean.data(), rstd.data(), res.data(), y.data(), w.data(), b.data(), rows, cols,
                                   1e-5f);
      g.residual_layernorm_forward(res_d.data(), out_d.data(), mean_d.data(), rstd_d.data(), res_d.data(), y_d.data(), w_d.data(),
                                   b_d.data(), rows, cols, 1e-5f);
      expect_close("residual_layernorm_forward res" + what, res_d.get(), res);
      expect_close("residual_layernorm_forward out" + what, out_d.get(), out);
      expect_close("residual_layernorm_forward mean" + what, mean_d.get(), mean);
      expect_close("residual_layernorm_forward rstd" + what, rstd_d.get(), rstd);
      g.residual_forward(res2_d.data(), res2_d.data(), y_d.data(), rows * cols);
      g.layernorm_forward(out2_d.data(), mean2_d.data(), rstd2_d.data(), res2_d.data(), w_d.data(), b_d.data(), rows, cols, 1e-5f);
      expect_same_bits("residual_layernorm_forward res" + what, res_d.get(), res2_d.get());
      expect_same_bits("residual_layernorm_forward out" + what, out_d.get(), out2_d.get());
      expect_same_bits("residual_layernorm_forward mean" + what, mean_d.get(), mean2_d.get());
      expect_same_bits("residual_layernorm_forward rstd" + what, rstd_d.get(), rstd2_d.get());
    }
  }
  SECTION("matmul") {
    auto x = random_vec<KT>(gen, N * C), w = random_vec<KT>(gen, F * C, 0.1f), b = random_vec<KT>(gen, F), dout = random_vec<KT>(gen, N * F);
    std::vector<KT> out(N * F), dinp(N * C);
    std::vector<float> wide(N * F), dwide(N * C), dw(F * C, 0.01f), db(F, 0.02f);
    OnGpu<KT> x_d(x), w_d(w), b_d(b), dout_d(dout), out_d(out), dinp_d(dinp);
    OnGpu<float> wide_d(wide), dwide_d(dwide), dw_d(dw), db_d(db);
    h.matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, F);
    g.matmul_forward(out_d.data(), x_d.data(), w_d.data(), b_d.data(), N, C, F);
    expect_close("matmul_forward", out_d.get(), out);
    h.matmul_forward_wide(wide.data(), x.data(), w.data(), nullptr, N, C, F);
    g.matmul_forward_wide(wide_d.data(), x_d.data(), w_d.data(), nullptr, N, C, F);
    expect_close("matmul_forward_wide (no bias)", wide_d.get(), wide);
    h.matmul_forward_wide(wide.data(), x.data(), w.data(), b.data(), N, C, F);  // the bias in cuBLASLt's epilogue
    g.matmul_forward_wide(wide_d.data(), x_d.data(), w_d.data(), b_d.data(), N, C, F);
    expect_close("matmul_forward_wide (bias)", wide_d.get(), wide);
    {  // an odd output width: columns of the output off 16-byte alignment (cuBLASLt picks another algorithm or none)
      const int odd = F - 3;
      std::vector<KT> o(N * odd);
      OnGpu<KT> o_d(o);
      h.matmul_forward(o.data(), x.data(), w.data(), b.data(), N, C, odd);
      g.matmul_forward(o_d.data(), x_d.data(), w_d.data(), b_d.data(), N, C, odd);
      expect_close("matmul_forward (odd width)", o_d.get(), o);
    }
    h.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C, F);
    g.matmul_backward(dinp_d.data(), dw_d.data(), db_d.data(), dout_d.data(), x_d.data(), w_d.data(), N, C, F);
    expect_close("matmul_backward dinp", dinp_d.get(), dinp, tolerance<KT>(F));   // sums over the F outputs
    expect_close("matmul_backward dweight", dw_d.get(), dw, tolerance<float>(N));  // and over the N rows
    expect_close("matmul_backward dbias", db_d.get(), db, tolerance<float>(N));
    h.matmul_backward_wide(dwide.data(), dw.data(), nullptr, dout.data(), x.data(), w.data(), N, C, F);
    g.matmul_backward_wide(dwide_d.data(), dw_d.data(), nullptr, dout_d.data(), x_d.data(), w_d.data(), N, C, F);
    expect_close("matmul_backward_wide dinp", dwide_d.get(), dwide, tolerance<float>(F));
    expect_close("matmul_backward_wide dweight (2nd call)", dw_d.get(), dw, tolerance<float>(2 * N));
    // Another micro-batch's gradients add to the earlier ones, the bias's too (cuBLASLt's epilogue
    // writes a GEMM's bias sums into a buffer of its own, which is then added).
    h.matmul_backward(nullptr, dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C, F);
    g.matmul_backward(nullptr, dw_d.data(), db_d.data(), dout_d.data(), x_d.data(), w_d.data(), N, C, F);
    expect_close("matmul_backward dweight (3rd call)", dw_d.get(), dw, tolerance<float>(3 * N));
    expect_close("matmul_backward dbias (2nd call)", db_d.get(), db, tolerance<float>(2 * N));
    {  // A split backward's halves (zero-bubble schedules, model/weight_grads.hpp): dinp alone, then dweight
       // and dbias alone with no weight, give the joined call's values on the GPU bit for bit.
      const std::vector<float> dw0(F * C, 0.01f), db0(F, 0.02f);
      OnGpu<KT> joined_dx(dinp), split_dx(dinp);
      OnGpu<float> joined_dw(dw0), joined_db(db0), split_dw(dw0), split_db(db0), joined_wide(dwide), split_wide(dwide);
      g.matmul_backward(joined_dx.data(), joined_dw.data(), joined_db.data(), dout_d.data(), x_d.data(), w_d.data(), N, C, F);
      g.matmul_backward(split_dx.data(), nullptr, nullptr, dout_d.data(), x_d.data(), w_d.data(), N, C, F);
      g.matmul_backward(static_cast<KT*>(nullptr), split_dw.data(), split_db.data(), dout_d.data(), x_d.data(), nullptr, N, C, F);
      g.matmul_backward_wide(joined_wide.data(), joined_dw.data(), nullptr, dout_d.data(), x_d.data(), w_d.data(), N, C, F);
      g.matmul_backward_wide(split_wide.data(), nullptr, nullptr, dout_d.data(), x_d.data(), w_d.data(), N, C, F);
      g.matmul_backward(static_cast<KT*>(nullptr), split_dw.data(), nullptr, dout_d.data(), x_d.data(), nullptr, N, C, F);
      CHECK(same_bits(split_dx.get(), joined_dx.get()));
      CHECK(same_bits(split_wide.get(), joined_wide.get()));
      CHECK(same_bits(split_dw.get(), joined_dw.get()));
      CHECK(same_bits(split_db.get(), joined_db.get()));
    }
    // The MLP: its first layer with the GELU (C -> F), its second layer's backward through the GELU
    // (F -> C, weights w read as C x F, x as the output gradient); then widths off the epilogue's
    // alignment (F - 8 and C - 8 are multiples of 8, F - 3 is not).
    for (const auto& [f, c] : {std::pair<int, int>{F, C}, std::pair<int, int>{F - 8, C}, std::pair<int, int>{F - 3, C}}) {
      const std::string what = f == F ? "" : " (width " + std::to_string(f) + ")";
      std::vector<KT> act(N * f), pre(N * f), dpre(N * f), dact(N * f);
      std::vector<float> dw2(static_cast<std::size_t>(c) * f, 0.01f), db2(c, 0.02f);
      OnGpu<KT> act_d(act), pre_d(pre), dpre_d(dpre), dact_d(dact);
      OnGpu<float> dw2_d(dw2), db2_d(db2);
      h.matmul_forward_gelu(act.data(), pre.data(), x.data(), w.data(), b.data(), N, c, f);
      g.matmul_forward_gelu(act_d.data(), pre_d.data(), x_d.data(), w_d.data(), b_d.data(), N, c, f);
      expect_close("matmul_forward_gelu pre" + what, pre_d.get(), pre);
      expect_close("matmul_forward_gelu out" + what, act_d.get(), act, fused_gelu_tolerance<KT>(c));
      // Both sides go on from the host's forward, so that the backward is checked on its own.
      OnGpu<KT> act_h(act), pre_h(pre);
      h.matmul_backward_gelu(dpre.data(), dact.data(), dw2.data(), db2.data(), x.data(), act.data(), w.data(), pre.data(), N, f, c);
      g.matmul_backward_gelu(dpre_d.data(), dact_d.data(), dw2_d.data(), db2_d.data(), x_d.data(), act_h.data(), w_d.data(), pre_h.data(),
                             N, f, c);
      expect_close("matmul_backward_gelu dpre" + what, dpre_d.get(), dpre, fused_gelu_tolerance<KT>(c));  // sums over the c outputs
      expect_close("matmul_backward_gelu dweight" + what, dw2_d.get(), dw2, tolerance<float>(N));
      expect_close("matmul_backward_gelu dbias" + what, db2_d.get(), db2, tolerance<float>(N));
      {  // split: the GELU's input gradient alone, then the weight half as a plain matmul_backward
        const std::vector<float> dw0(static_cast<std::size_t>(c) * f, 0.01f), db0(c, 0.02f);
        OnGpu<KT> joined_dpre(dpre), split_dpre(dpre), scratch(dact);
        OnGpu<float> joined_dw(dw0), joined_db(db0), split_dw(dw0), split_db(db0);
        g.matmul_backward_gelu(joined_dpre.data(), scratch.data(), joined_dw.data(), joined_db.data(), x_d.data(), act_h.data(), w_d.data(),
                               pre_h.data(), N, f, c);
        g.matmul_backward_gelu(split_dpre.data(), scratch.data(), nullptr, nullptr, x_d.data(), act_h.data(), w_d.data(), pre_h.data(), N,
                               f, c);
        g.matmul_backward(static_cast<KT*>(nullptr), split_dw.data(), split_db.data(), x_d.data(), act_h.data(), nullptr, N, f, c);
        CHECK(same_bits(split_dpre.get(), joined_dpre.get()));
        CHECK(same_bits(split_dw.get(), joined_dw.get()));
        CHECK(same_bits(split_db.get(), joined_db.get()));
      }
    }
  }
  SECTION("attention") {
    // The model's shape, then lengths that are not a multiple of the 64-row tile (several tiles, a
    // ragged last one; T = 1000: 16 tiles, as in training), every padded head dim (16, 32 via 24, 64 via
    // 40 on the unvectorised loads, 128), multi-head, grouped-query and multi-query.
    struct Shape {
      int B, T, NH, HD;
    };
    for (const Shape sh : {Shape{B, T, NH, HD}, Shape{2, 100, 4, 24}, Shape{1, 200, 2, 40}, Shape{1, 130, 2, 128}, Shape{3, 65, 4, 64},
                            Shape{1, 1000, 2, 64}})
      for (int NKV : {sh.NH, sh.NH / 2, 1}) {  // multi-head, grouped-query, multi-query
        const long rows = static_cast<long>(sh.B) * sh.T, W = static_cast<long>(sh.NH + 2 * NKV) * sh.HD, Ch = sh.NH * sh.HD;
        auto qkv = random_vec<KT>(gen, rows * W), dout = random_vec<KT>(gen, rows * Ch);
        std::vector<KT> out(rows * Ch), dqkv(rows * W);
        std::vector<float> lse(static_cast<std::size_t>(sh.B) * sh.NH * sh.T), scratch(kernels::attention_scratch_floats(sh.B, sh.T, sh.NH));
        OnGpu<KT> qkv_d(qkv), dout_d(dout), out_d(out), dqkv_d(dqkv);
        OnGpu<float> lse_d(lse), scratch_d(scratch);
        const std::string what = " (B=" + std::to_string(sh.B) + " T=" + std::to_string(sh.T) + " HD=" + std::to_string(sh.HD) + ", " +
                                 std::to_string(sh.NH) + "/" + std::to_string(NKV) + " heads)";
        // One document per sample, then documents packed in each sample: lengths 1 to 150 (one-token
        // documents, boundaries inside and on the edges of 64-key tiles and 128-row query tiles, a
        // document spanning several tiles), a different cut in each sample; then a sliding window of
        // 70 keys (not a tile multiple: windows start inside tiles), alone and with the documents.
        for (const auto& [packed, window] : {std::pair<bool, int>{false, 0}, {true, 0}, {false, 70}, {true, 70}}) {
          std::vector<int> docs;
          if (packed) {
            std::uniform_int_distribution<int> length(1, 150);
            for (int b = 0; b < sh.B; ++b)
              for (int t = 0, start = 0, next = 0; t < sh.T; ++t) {
                if (t == next) start = t, next = t + (t == 64 ? 64 : length(gen));  // one document exactly a tile
                docs.push_back(start);
              }
          }
          OnGpu<int> docs_d(packed ? docs : std::vector<int>{0});
          const kernels::KeyVisibility ds{packed ? docs.data() : nullptr, window};
          const kernels::KeyVisibility ds_d{packed ? docs_d.data() : nullptr, window};
          const std::string w = what + (packed ? ", packed documents" : "") + (window ? ", window " + std::to_string(window) : "");
          h.attention_forward(out.data(), lse.data(), scratch.data(), qkv.data(), ds, sh.B, sh.T, sh.NH, NKV, sh.HD);
          g.attention_forward(out_d.data(), lse_d.data(), scratch_d.data(), qkv_d.data(), ds_d, sh.B, sh.T, sh.NH, NKV, sh.HD);
          const long keys = sh.T + 2 * sh.HD;  // a row's keys, after the HD-term products
          expect_close("attention_forward out" + w, out_d.get(), out, attention_product_tolerance<KT>(keys));
          expect_close("attention_forward lse" + w, lse_d.get(), lse, tolerance<float>(keys));
          // Both backwards read the host's output and log-sum-exp, so the check is of the backward alone.
          OnGpu<KT> out_host_d(out);
          OnGpu<float> lse_host_d(lse);
          h.attention_backward(dqkv.data(), scratch.data(), dout.data(), out.data(), lse.data(), qkv.data(), ds, sh.B, sh.T, sh.NH, NKV,
                               sh.HD);
          g.attention_backward(dqkv_d.data(), scratch_d.data(), dout_d.data(), out_host_d.data(), lse_host_d.data(), qkv_d.data(), ds_d,
                               sh.B, sh.T, sh.NH, NKV, sh.HD);
          expect_close("attention_backward dqkv" + w, dqkv_d.get(), dqkv, attention_product_tolerance<KT>(keys));
        }
      }
  }
  SECTION("attention blocks (ring attention) and column copies") {
    // Two chunks of T/2 rows of one sample: the second query chunk against the first key chunk (all
    // visible), merged after its own chunk (causal); then both blocks' gradients.
    for (int NKV : {NH, NH / 2}) {
      const int W = (NH + 2 * NKV) * HD, KW = 2 * NKV * HD, Tc = T / 2;
      auto qkv = random_vec<KT>(gen, static_cast<std::size_t>(T) * W), dout = random_vec<KT>(gen, static_cast<std::size_t>(Tc) * C);
      std::vector<KT> kv(static_cast<std::size_t>(T) * KW), grad(qkv.size());
      std::vector<float> scratch(static_cast<std::size_t>(NH) * 2 * Tc * Tc);
      OnGpu<KT> qkv_d(qkv), kv_d(kv), dout_d(dout), grad_d(grad);
      OnGpu<float> scratch_d(scratch);
      h.copy_columns(kv.data(), qkv.data(), T, W, C, KW);
      g.copy_columns(kv_d.data(), qkv_d.data(), T, W, C, KW);
      expect_close("copy_columns", kv_d.get(), kv);
      // insert_columns: the key/value columns back into a copy of qkv whose other columns differ.
      std::vector<KT> into = random_vec<KT>(gen, qkv.size());
      OnGpu<KT> into_d(into);
      h.insert_columns(into.data(), kv.data(), T, W, C, KW);
      g.insert_columns(into_d.data(), kv_d.data(), T, W, C, KW);
      expect_close("insert_columns", into_d.get(), into);
      const KT* q = qkv.data() + static_cast<long>(Tc) * W;
      const KT* q_d = qkv_d.data() + static_cast<long>(Tc) * W;
      // One document, then packed documents in the second chunk's rows (starts 20, 33, 40: before the
      // chunk and inside it, so that some rows see no key of the first chunk), then a window of 13 keys
      // (the later rows see none of the first chunk).
      for (const auto& [packed, window] : {std::pair<bool, int>{false, 0}, {true, 0}, {false, 13}}) {
        std::vector<int> docs(static_cast<std::size_t>(Tc));
        for (int i = 0; i < Tc; ++i) docs[static_cast<std::size_t>(i)] = Tc + i < 33 ? 20 : Tc + i < 40 ? 33 : 40;
        OnGpu<int> docs_d(docs);
        const kernels::KeyVisibility ds{packed ? docs.data() : nullptr, window};
        const kernels::KeyVisibility ds_d{packed ? docs_d.data() : nullptr, window};
        std::vector<float> out(static_cast<std::size_t>(Tc) * C, 0.0f), lse(static_cast<std::size_t>(NH) * Tc, -INFINITY);
        std::vector<float> dq(out.size(), 0.0f), dkv(static_cast<std::size_t>(T) * KW, 0.0f);
        std::vector<KT> out_kt(static_cast<std::size_t>(Tc) * C);
        OnGpu<float> out_d(out), lse_d(lse), dq_d(dq), dkv_d(dkv);
        const std::string w = packed ? " (packed documents)" : window ? " (window " + std::to_string(window) + ")" : "";
        for (int kc : {1, 0}) {
          h.attention_block_forward(out.data(), lse.data(), scratch.data(), q, W, kv.data() + static_cast<long>(kc) * Tc * KW, KW, Tc, Tc,
                                    NH, NKV, HD, Tc, kc * Tc, ds);
          g.attention_block_forward(out_d.data(), lse_d.data(), scratch_d.data(), q_d, W, kv_d.data() + static_cast<long>(kc) * Tc * KW,
                                    KW, Tc, Tc, NH, NKV, HD, Tc, kc * Tc, ds_d);
        }
        expect_close("attention_block_forward out" + w, out_d.get(), out, attention_product_tolerance<KT>(T + 2 * HD));
        expect_close("attention_block_forward lse" + w, lse_d.get(), lse, tolerance<float>(T + 2 * HD));
        h.narrow(out_kt.data(), out.data(), static_cast<long>(out.size()));
        OnGpu<KT> out_host_d(out_kt);
        OnGpu<float> lse_host_d(lse);
        for (int kc : {1, 0}) {
          h.attention_block_backward(dq.data(), dkv.data() + static_cast<long>(kc) * Tc * KW, KW, scratch.data(), dout.data(), out_kt.data(),
                                     lse.data(), q, W, kv.data() + static_cast<long>(kc) * Tc * KW, KW, Tc, Tc, NH, NKV, HD, Tc, kc * Tc, ds);
          g.attention_block_backward(dq_d.data(), dkv_d.data() + static_cast<long>(kc) * Tc * KW, KW, scratch_d.data(), dout_d.data(),
                                     out_host_d.data(), lse_host_d.data(), q_d, W, kv_d.data() + static_cast<long>(kc) * Tc * KW, KW, Tc,
                                     Tc, NH, NKV, HD, Tc, kc * Tc, ds_d);
        }
        expect_close("attention_block_backward dq" + w, dq_d.get(), dq, attention_product_tolerance<KT>(T + 2 * HD));
        expect_close("attention_block_backward dkv" + w, dkv_d.get(), dkv, attention_product_tolerance<KT>(T + 2 * HD));
        if (packed || window) continue;
        // One rounding of fp32 gradients whose difference is that of the blocks' fp32 sums (no 16-bit
        // products in the block kernels): T + 2 HD terms.
        h.narrow_columns(grad.data(), dkv.data(), T, W, C, KW);
        g.narrow_columns(grad_d.data(), dkv_d.data(), T, W, C, KW);
        expect_close("narrow_columns", grad_d.get(), grad, tolerance<KT>(T + 2 * HD));
      }
      // Generation with a key/value cache: one query row at position p against the cached keys [0, p],
      // then within a window of 13 keys.
      for (const auto& [p, window] : {std::pair<int, int>{0, 0}, {17, 0}, {T - 1, 0}, {T - 1, 13}}) {
        std::vector<float> o1(C, 0.0f), l1(NH, -INFINITY);
        OnGpu<float> o1_d(o1), l1_d(l1);
        const KT* qp = qkv.data() + static_cast<long>(p) * W;
        const KT* qp_d = qkv_d.data() + static_cast<long>(p) * W;
        const kernels::KeyVisibility vis{nullptr, window};
        h.attention_block_forward(o1.data(), l1.data(), scratch.data(), qp, W, kv.data(), KW, 1, p + 1, NH, NKV, HD, p, 0, vis);
        g.attention_block_forward(o1_d.data(), l1_d.data(), scratch_d.data(), qp_d, W, kv_d.data(), KW, 1, p + 1, NH, NKV, HD, p, 0, vis);
        const std::string at = std::to_string(p) + (window ? " in a window of " + std::to_string(window) : "");
        expect_close("attention_block_forward decode at " + at, o1_d.get(), o1, attention_product_tolerance<KT>(T + 2 * HD));
        expect_close("attention_block_forward decode lse at " + at, l1_d.get(), l1, tolerance<float>(T + 2 * HD));
      }
    }
  }
  SECTION("rmsnorm") {
    // The test's rows, then rows of 30 columns (the backward's element-by-element path), of 768 and of
    // 1100 (wider than the fused backward takes), as for LayerNorm.
    for (const auto& [rows, cols] : {std::pair<long, int>{N, C}, std::pair<long, int>{500, 30}, std::pair<long, int>{3000, 768},
                                     std::pair<long, int>{3000, 1100}}) {
      auto x = random_vec<KT>(gen, rows * cols, 2.0f), w = random_vec<KT>(gen, cols), dout = random_vec<KT>(gen, rows * cols);
      auto dinp = random_vec<KT>(gen, rows * cols);  // accumulated into
      std::vector<KT> out(rows * cols);
      std::vector<float> rstd(rows), dw(cols, 0.1f);
      OnGpu<KT> x_d(x), w_d(w), out_d(out), dout_d(dout), dinp_d(dinp);
      OnGpu<float> rstd_d(rstd), dw_d(dw);
      const std::string what = rows == N ? "" : " (" + std::to_string(rows) + "x" + std::to_string(cols) + ")";
      h.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), rows, cols, 1e-6f);
      g.rmsnorm_forward(out_d.data(), rstd_d.data(), x_d.data(), w_d.data(), rows, cols, 1e-6f);
      expect_close("rmsnorm_forward out" + what, out_d.get(), out);
      expect_close("rmsnorm_forward rstd" + what, rstd_d.get(), rstd);
      h.rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), rows, cols);
      g.rmsnorm_backward(dinp_d.data(), dw_d.data(), dout_d.data(), x_d.data(), w_d.data(), rstd_d.data(), rows, cols);
      expect_close("rmsnorm_backward dinp" + what, dinp_d.get(), dinp);
      expect_close("rmsnorm_backward dweight" + what, dw_d.get(), dw, tolerance<float>(rows));  // column sums over the rows
      // The residual add before the norm, as for LayerNorm.
      auto y = random_vec<KT>(gen, rows * cols);
      std::vector<KT> res = x;
      OnGpu<KT> y_d(y), res_d(x), res2_d(x), out2_d(out);
      OnGpu<float> rstd2_d(rstd);
      h.residual_rmsnorm_forward(res.data(), out.data(), rstd.data(), res.data(), y.data(), w.data(), rows, cols, 1e-6f);
      g.residual_rmsnorm_forward(res_d.data(), out_d.data(), rstd_d.data(), res_d.data(), y_d.data(), w_d.data(), rows, cols, 1e-6f);
      expect_close("residual_rmsnorm_forward res" + what, res_d.get(), res);
      expect_close("residual_rmsnorm_forward out" + what, out_d.get(), out);
      expect_close("residual_rmsnorm_forward rstd" + what, rstd_d.get(), rstd);
      g.residual_forward(res2_d.data(), res2_d.data(), y_d.data(), rows * cols);
      g.rmsnorm_forward(out2_d.data(), rstd2_d.data(), res2_d.data(), w_d.data(), rows, cols, 1e-6f);
      expect_same_bits("residual_rmsnorm_forward res" + what, res_d.get(), res2_d.get());
      expect_same_bits("residual_rmsnorm_forward out" + what, out_d.get(), out2_d.get());
      expect_same_bits("residual_rmsnorm_forward rstd" + what, rstd_d.get(), rstd2_d.get());
    }
  }
  SECTION("rope and swiglu") {
    const int NKV = NH / 2, W = (NH + 2 * NKV) * HD, R = HD - 4;  // partial rotary: 12 of 16 dims
    // Llama 3.1's scaling with an original context of 64: of the 6 pairs (wavelengths 2 pi 10000^(i/6):
    // 6.3, 29, 135, ...) the first is kept, the second blended, the others scaled.
    kernels::RopeFrequencies f;
    f.factor = 8, f.original_context = 64;
    auto x = random_vec<KT>(gen, N * W);
    // Positions t0 + t, then position ids reset at packed documents' starts (every 11th token).
    std::vector<int> pos(static_cast<std::size_t>(N));
    for (long r = 0; r < N; ++r) pos[static_cast<std::size_t>(r)] = static_cast<int>((r % T) % 11);
    OnGpu<int> pos_d(pos);
    for (const bool reset : {false, true}) {
      const std::string w = reset ? " (position ids)" : "";
      OnGpu<KT> xf_d(x);
      h.rope_forward(x.data(), B, T, W, NH + NKV, HD, R, f, 5, reset ? pos.data() : nullptr);
      g.rope_forward(xf_d.data(), B, T, W, NH + NKV, HD, R, f, 5, reset ? pos_d.data() : nullptr);
      expect_close("rope_forward" + w, xf_d.get(), x);
      // The backward turns the host's forward output on both sides, so that it is checked alone (one
      // rounding, not the forward's step carried through the rotation and then another).
      OnGpu<KT> xb_d(x);
      h.rope_backward(x.data(), B, T, W, NH + NKV, HD, R, f, 5, reset ? pos.data() : nullptr);
      g.rope_backward(xb_d.data(), B, T, W, NH + NKV, HD, R, f, 5, reset ? pos_d.data() : nullptr);
      expect_close("rope_backward" + w, xb_d.get(), x);
    }
    auto gu = random_vec<KT>(gen, N * 2 * F, 3.0f), dy = random_vec<KT>(gen, N * F);
    std::vector<KT> out(N * F), dgu(N * 2 * F);
    OnGpu<KT> gu_d(gu), dy_d(dy), out_d(out), dgu_d(dgu);
    h.swiglu_forward(out.data(), gu.data(), N, F);
    g.swiglu_forward(out_d.data(), gu_d.data(), N, F);
    expect_close("swiglu_forward", out_d.get(), out);
    h.swiglu_backward(dgu.data(), gu.data(), dy.data(), N, F);
    g.swiglu_backward(dgu_d.data(), gu_d.data(), dy_d.data(), N, F);
    expect_close("swiglu_backward", dgu_d.get(), dgu);
  }
  SECTION("elementwise") {
    // A whole number of 16-byte packs, then 3 elements short of one: the element-by-element path.
    for (const long n : {N * F, N * F - 3}) {
      const std::string what = n == N * F ? "" : " (odd length)";
      auto x = random_vec<KT>(gen, n, 3.0f), y = random_vec<KT>(gen, n), dy = random_vec<KT>(gen, n);
      x[0] = from_float<KT>(-40.0f);  // saturated GELU: no inf * 0
      x[1] = from_float<KT>(40.0f);
      std::vector<KT> out(n), dx(n);
      OnGpu<KT> x_d(x), y_d(y), dy_d(dy), out_d(out), dx_d(dx);
      h.gelu_forward(out.data(), x.data(), n);
      g.gelu_forward(out_d.data(), x_d.data(), n);
      expect_close("gelu_forward" + what, out_d.get(), out);
      h.gelu_backward(dx.data(), x.data(), dy.data(), n);
      g.gelu_backward(dx_d.data(), x_d.data(), dy_d.data(), n);
      expect_close("gelu_backward" + what, dx_d.get(), dx);
      h.residual_forward(out.data(), x.data(), y.data(), n);
      g.residual_forward(out_d.data(), x_d.data(), y_d.data(), n);
      expect_close("residual_forward" + what, out_d.get(), out);
      g.copy(out_d.data(), y_d.data(), n);
      expect_close("copy" + what, out_d.get(), y);
      g.zero(out_d.data(), n);
      expect_close("zero" + what, out_d.get(), std::vector<KT>(n, from_float<KT>(0.0f)));
      auto f = random_vec<float>(gen, n);
      std::vector<float> widened(n);
      OnGpu<float> f_d(f), widened_d(widened);
      h.narrow(out.data(), f.data(), n);
      g.narrow(out_d.data(), f_d.data(), n);
      expect_close("narrow" + what, out_d.get(), out);
      h.widen(widened.data(), out.data(), n);
      g.widen(widened_d.data(), out_d.data(), n);
      expect_close("widen" + what, widened_d.get(), widened);
      g.residual_forward(x_d.data(), x_d.data(), y_d.data(), n);  // in place, as the model adds its residuals
      h.residual_forward(x.data(), x.data(), y.data(), n);
      expect_close("residual_forward in place" + what, x_d.get(), x);
    }
  }
  SECTION("cross-entropy") {
    // V = 100 rows (bf16, fp16: not whole 16-byte packs) and 96 (whole packs in every type).
    for (const int Vx : {V, 96}) {
      const std::string what = Vx == V ? "" : " (V=96)";
      auto logits = random_vec<KT>(gen, N * Vx, 4.0f);
      std::vector<float> mx(N), sum(N), tgt(N), lse(N), dloss(N, 1.0f / N);
      OnGpu<KT> logits_d(logits);
      OnGpu<float> mx_d(mx), sum_d(sum), tgt_d(tgt), lse_d(lse), dloss_d(dloss);
      h.xent_row_max(mx.data(), logits.data(), N, Vx);
      g.xent_row_max(mx_d.data(), logits_d.data(), N, Vx);
      expect_close("xent_row_max" + what, mx_d.get(), mx);
      h.xent_row_sum_exp(sum.data(), logits.data(), mx.data(), N, Vx);
      g.xent_row_sum_exp(sum_d.data(), logits_d.data(), mx_d.data(), N, Vx);
      expect_close("xent_row_sum_exp" + what, sum_d.get(), sum, tolerance<float>(Vx));
      // One pass: the same maximum; each sum term rounded as in row_sum_exp, then once more (a multiply
      // and an expf, 3 u) at each growth of its lane's maximum, at most once per pack the lane reads
      // (V / (32 P), 1 here, 32 in the long rows below): far inside tolerance<float>(V)'s 2 (V + 16) u,
      // which covers the sum's other order.
      for (const int Vr : {Vx, 4096 + Vx}) {
        auto rows = Vr == Vx ? logits : random_vec<KT>(gen, N * Vr, 4.0f);
        if (Vr != Vx)  // the first row ascending: the lanes' maximum grows at every pack
          for (int v = 0; v < Vr; ++v) rows[v] = from_float<KT>(-8.0f + 16.0f * v / Vr);
        std::vector<float> mx1(N), sum1(N);
        OnGpu<KT> rows_d(rows);
        OnGpu<float> mx1_d(mx1), sum1_d(sum1);
        h.xent_row_max_sum_exp(mx1.data(), sum1.data(), rows.data(), N, Vr);
        g.xent_row_max_sum_exp(mx1_d.data(), sum1_d.data(), rows_d.data(), N, Vr);
        const std::string w = " (V=" + std::to_string(Vr) + ")";
        expect_close("xent_row_max_sum_exp max" + w, mx1_d.get(), mx1);
        expect_close("xent_row_max_sum_exp sum" + w, sum1_d.get(), sum1, tolerance<float>(Vr));
      }
      h.xent_target_logit(tgt.data(), logits.data(), tokens.data(), vocab_start, N, Vx);
      g.xent_target_logit(tgt_d.data(), logits_d.data(), tokens_d.data(), vocab_start, N, Vx);
      expect_close("xent_target_logit" + what, tgt_d.get(), tgt);
      // Both add to a sum already holding 0.25 (the loss of earlier micro-batches), on the device for cuda.
      double loss_h = 0.25;
      OnGpu<double> loss_d(std::vector<double>{0.25});
      h.xent_loss(&loss_h, lse.data(), mx.data(), sum.data(), tgt.data(), nullptr, N);
      g.xent_loss(loss_d.data(), lse_d.data(), mx_d.data(), sum_d.data(), tgt_d.data(), nullptr, N);
      const double loss_g = loss_d.get()[0];
      expect_close("xent_loss lse" + what, lse_d.get(), lse, tolerance<float>(Vx));
      expect_close("xent_loss sum" + what, std::vector<float>{static_cast<float>(loss_g)}, std::vector<float>{static_cast<float>(loss_h)},
                   tolerance<float>(N + Vx));  // N rows, each a sum over V
      // A loss mask (every third row counts, as a fine-tuning batch's answers): the masked sum, and the
      // rows' gradient weights.
      std::vector<float> mask(N);
      for (long i = 0; i < N; ++i) mask[static_cast<std::size_t>(i)] = i % 3 == 0 ? 1.0f : 0.0f;
      OnGpu<float> mask_d(mask);
      double masked_h = 0.0;
      OnGpu<double> masked_d(std::vector<double>{0.0});
      h.xent_loss(&masked_h, lse.data(), mx.data(), sum.data(), tgt.data(), mask.data(), N);
      g.xent_loss(masked_d.data(), lse_d.data(), mx_d.data(), sum_d.data(), tgt_d.data(), mask_d.data(), N);
      expect_close("xent_loss masked sum" + what, std::vector<float>{static_cast<float>(masked_d.get()[0])},
                   std::vector<float>{static_cast<float>(masked_h)}, tolerance<float>(N + Vx));
      h.loss_weights(dloss.data(), mask.data(), 1.0f / N, N);
      g.loss_weights(dloss_d.data(), mask_d.data(), 1.0f / N, N);
      expect_same_bits("loss_weights" + what, dloss_d.get(), dloss);
      h.xent_backward(logits.data(), logits.data(), lse.data(), tokens.data(), dloss.data(), vocab_start, N, Vx);
      g.xent_backward(logits_d.data(), logits_d.data(), lse_d.data(), tokens_d.data(), dloss_d.data(), vocab_start, N, Vx);
      expect_close("xent_backward (in place)" + what, logits_d.get(), logits);
    }
  }
  SECTION("moe") {  // E experts, top-K, R = N*K rows; a quarter of the assignments dropped (pos -1)
    const int E = 8, K = 2;
    const long R = N * K;
    auto logits = random_vec<float>(gen, N * E, 2.0f), dw = random_vec<float>(gen, N * K), daux = random_vec<float>(gen, E, 0.1f);
    std::vector<float> probs(N * E), w(N * K), dlogits(N * E);
    std::vector<int> idx(N * K);
    OnGpu<float> logits_d(logits), probs_d(probs), w_d(w), dw_d(dw), daux_d(daux), dlogits_d(dlogits);
    OnGpu<int> idx_d(idx);
    h.moe_router_forward(probs.data(), idx.data(), w.data(), logits.data(), N, E, K);
    g.moe_router_forward(probs_d.data(), idx_d.data(), w_d.data(), logits_d.data(), N, E, K);
    expect_close("moe_router_forward probs", probs_d.get(), probs);
    expect_close("moe_router_forward weights", w_d.get(), w);
    CHECK(idx_d.get() == idx);  // the same choices (random logits: no ties)
    h.moe_router_backward(dlogits.data(), probs.data(), idx.data(), dw.data(), daux.data(), N, E, K);
    g.moe_router_backward(dlogits_d.data(), probs_d.data(), idx_d.data(), dw_d.data(), daux_d.data(), N, E, K);
    expect_close("moe_router_backward", dlogits_d.get(), dlogits);
    std::vector<int> src(R), pos(N * K);
    for (long r = 0; r < R; ++r) src[r] = static_cast<int>((r * 7919) % N), pos[r] = r % 4 == 3 ? -1 : static_cast<int>((r * 104729) % R);
    auto x = random_vec<KT>(gen, N * C), scale = random_vec<float>(gen, R), rows = random_vec<float>(gen, R * C);
    std::vector<KT> gathered(R * C);
    std::vector<float> combined(N * C, 0.5f), dots(N * K);
    OnGpu<int> src_d(src), pos_d(pos);
    OnGpu<KT> x_d(x), gathered_d(gathered);
    OnGpu<float> scale_d(scale), rows_d(rows), combined_d(combined), dots_d(dots);
    h.moe_gather_rows(gathered.data(), x.data(), src.data(), scale.data(), R, C);
    g.moe_gather_rows(gathered_d.data(), x_d.data(), src_d.data(), scale_d.data(), R, C);
    expect_close("moe_gather_rows (scaled)", gathered_d.get(), gathered);
    h.moe_combine(combined.data(), rows.data(), pos.data(), w.data(), N, K, C, true);
    g.moe_combine(combined_d.data(), rows_d.data(), pos_d.data(), w_d.data(), N, K, C, true);
    expect_close("moe_combine (accumulate)", combined_d.get(), combined);
    h.moe_row_dots(dots.data(), x.data(), rows.data(), pos.data(), N, K, C);
    g.moe_row_dots(dots_d.data(), x_d.data(), rows_d.data(), pos_d.data(), N, K, C);
    expect_close("moe_row_dots", dots_d.get(), dots, tolerance<float>(C));
  }
  SECTION("optimizer") {
    const long n = 100003;
    auto grad = random_vec<float>(gen, n), master = random_vec<float>(gen, n), m = random_vec<float>(gen, n, 0.1f);
    auto v = random_vec<float>(gen, n, 0.1f);
    for (auto& x : v) x = x * x;
    std::vector<KT> copy(n);
    OnGpu<float> grad_d(grad), master_d(master), m_d(m), v_d(v);
    OnGpu<KT> copy_d(copy);
    double sq_h = 0.0;
    OnGpu<double> sq_d(std::vector<double>{0.0});
    h.sum_squares(&sq_h, grad.data(), n);
    g.sum_squares(sq_d.data(), grad_d.data(), n);
    const double sq_g = sq_d.get()[0];
    INFO("sum_squares host " << sq_h << " cuda " << sq_g);
    // Both add the exact squares (positive terms) in double, each within n 2^-53 of the exact sum.
    CHECK(std::abs(sq_g - sq_h) <= 2.0 * n * 0x1p-53 * sq_h);
    h.fill(m.data(), 0.125f, n / 2);
    g.fill(m_d.data(), 0.125f, n / 2);
    expect_close("fill", m_d.get(), m);
    KT* copy_h = std::is_same_v<KT, float> ? nullptr : copy.data();
    KT* copy_g = std::is_same_v<KT, float> ? nullptr : copy_d.data();
    // Three tensors in one launch: decayed, not decayed (after a gap of 30 elements left alone), decayed.
    const std::vector<kernels::AdamRun> runs{{0, 50000, 0, 0.1f}, {50030, 20000, 50000, 0.0f}, {70030, n - 70030, 70000, 0.1f}};
    const long elements = runs.back().first + runs.back().count;
    OnGpu<kernels::AdamRun> runs_d(runs);
    // The gradients scaled by 0.61 in the update (clipping, unscaling), the factor in the device's memory
    // as step_factor leaves it.
    const float factor = 0.61f;
    OnGpu<float> factor_d(std::vector<float>{factor});
    h.adamw_update(master.data(), copy_h, m.data(), v.data(), grad.data(), &factor, runs.data(), 3, elements, 1e-3f, 0.9f, 0.95f, 1e-8f, 3);
    g.adamw_update(master_d.data(), copy_g, m_d.data(), v_d.data(), grad_d.data(), factor_d.data(), runs_d.data(), 3, elements, 1e-3f, 0.9f,
                   0.95f, 1e-8f, 3);
    expect_close("adamw_update master", master_d.get(), master);
    expect_close("adamw_update m", m_d.get(), m);
    expect_close("adamw_update v", v_d.get(), v);
    if (copy_h) expect_close(std::string("adamw_update ") + type_name<KT>() + " copy", copy_d.get(), copy);
    // A NaN factor (a non-finite loss or norm) leaves every element as it was, on both.
    OnGpu<float> nan_d(std::vector<float>{NAN});
    const auto master_before = master_d.get(), m_before = m_d.get();
    g.adamw_update(master_d.data(), copy_g, m_d.data(), v_d.data(), grad_d.data(), nan_d.data(), runs_d.data(), 3, elements, 1e-3f, 0.9f,
                   0.95f, 1e-8f, 4);
    CHECK(master_d.get() == master_before);
    CHECK(m_d.get() == m_before);
    // step_factor: the same double arithmetic on both (kernels/adamw_math.hpp), so the same bits: below
    // the clip, clipped, unscaled, and NaN for an infinite norm.
    for (const auto& [squares, scale, clip] : {std::tuple{0.25, 1.0, 1.0}, std::tuple{16.0, 1.0, 1.0}, std::tuple{16.0 * 1024 * 1024, 1024.0, 2.0},
                                               std::tuple{static_cast<double>(INFINITY), 1.0, 1.0}}) {
      const std::vector<double> sums{20.0, squares};
      OnGpu<double> sums_d(sums);
      OnGpu<float> out_d(std::vector<float>{0.0f});
      float out_h = 0.0f;
      h.step_factor(&out_h, sums.data(), 10.0, scale, clip);
      g.step_factor(out_d.data(), sums_d.data(), 10.0, scale, clip);
      const float got = out_d.get()[0];
      INFO("squares " << squares << " scale " << scale << " clip " << clip << ": cuda " << got << " host " << out_h);
      CHECK((got == out_h || (std::isnan(got) && std::isnan(out_h))));
    }
  }
  SECTION("fp8") {
    // amax and the codes: the same arithmetic on both (kernels/fp8_math.hpp: a maximum, an exact scaling
    // and one rounding to nearest even), so the same bits. Values over 2^30 of range, so that some are
    // subnormal or zero in E4M3 at the tensor's scale; shapes that are not whole 32 x 32 tiles.
    const long R = 70, Cw = 100, n = R * Cw;
    auto x = random_vec<KT>(gen, n, 3.0f);
    for (long i = 0; i < n; i += 7) x[static_cast<std::size_t>(i)] = from_float<KT>(to_float(x[static_cast<std::size_t>(i)]) * 0x1p-20f);
    x[5] = from_float<KT>(-1000.0f);
    OnGpu<KT> x_d(x);
    float amax_h = 0.0f;
    OnGpu<float> amax_d(std::vector<float>{0.0f});
    h.fp8_amax(&amax_h, x.data(), n);
    g.fp8_amax(amax_d.data(), x_d.data(), n);
    CHECK(amax_d.get()[0] == amax_h);
    CHECK(amax_h == 1000.0f);
    for (const int format : {0, 1})
      for (const int transpose : {0, 1}) {
        INFO("format " << format << " transpose " << transpose);
        std::vector<std::uint8_t> codes(n);
        OnGpu<std::uint8_t> codes_d(codes);
        h.fp8_quantize(codes.data(), x.data(), &amax_h, R, Cw, format, transpose);
        g.fp8_quantize(codes_d.data(), x_d.data(), amax_d.data(), R, Cw, format, transpose);
        CHECK(codes_d.get() == codes);
      }
    // The GEMMs: cuBLASLt's fp8 matmul (M, N, K multiples of 16) and the plain kernel (not), against the
    // host's sgemm of the decoded values: exact products, fp32 sums in another order (tolerance<float>(K)
    // of the largest output) and, for a KT output, its one rounding.
    for (const auto& [M, Nn, K] : {std::tuple<long, long, long>{64, 48, 96}, std::tuple<long, long, long>{20, 12, 36}}) {
      INFO("M " << M << " N " << Nn << " K " << K);
      auto a_x = random_vec<KT>(gen, M * K), b_x = random_vec<KT>(gen, Nn * K, 0.1f), bias = random_vec<KT>(gen, Nn);
      std::vector<float> amaxes(2);
      h.fp8_amax(&amaxes[0], a_x.data(), M * K);
      h.fp8_amax(&amaxes[1], b_x.data(), Nn * K);
      std::vector<std::uint8_t> a(M * K), b(Nn * K);
      h.fp8_quantize(a.data(), a_x.data(), &amaxes[0], M, K, 1, 0);  // E5M2 times E4M3, as the backward's products
      h.fp8_quantize(b.data(), b_x.data(), &amaxes[1], Nn, K, 0, 0);
      OnGpu<std::uint8_t> a_d(a), b_d(b);
      OnGpu<float> amaxes_d(amaxes);
      OnGpu<KT> bias_d(bias);
      std::vector<KT> out(M * Nn);
      OnGpu<KT> out_d(out);
      h.gemm_fp8(out.data(), a.data(), 1, &amaxes[0], b.data(), 0, &amaxes[1], bias.data(), M, Nn, K);
      g.gemm_fp8(out_d.data(), a_d.data(), 1, amaxes_d.data(), b_d.data(), 0, amaxes_d.data() + 1, bias_d.data(), M, Nn, K);
      expect_close("gemm_fp8 " + std::to_string(M) + "x" + std::to_string(Nn) + "x" + std::to_string(K), out_d.get(), out, tolerance<KT>(K));
      auto wide = random_vec<float>(gen, M * Nn);
      OnGpu<float> wide_d(wide);
      h.gemm_fp8_wide(wide.data(), 1, a.data(), 1, &amaxes[0], b.data(), 0, &amaxes[1], nullptr, M, Nn, K);
      g.gemm_fp8_wide(wide_d.data(), 1, a_d.data(), 1, amaxes_d.data(), b_d.data(), 0, amaxes_d.data() + 1, nullptr, M, Nn, K);
      expect_close("gemm_fp8_wide accumulated", wide_d.get(), wide, tolerance<float>(K));
      h.gemm_fp8_wide(wide.data(), 0, a.data(), 1, &amaxes[0], b.data(), 0, &amaxes[1], bias.data(), M, Nn, K);
      g.gemm_fp8_wide(wide_d.data(), 0, a_d.data(), 1, amaxes_d.data(), b_d.data(), 0, amaxes_d.data() + 1, bias_d.data(), M, Nn, K);
      expect_close("gemm_fp8_wide with bias", wide_d.get(), wide, tolerance<float>(K));
    }
    x[n / 2] = from_float<KT>(NAN);
    OnGpu<KT> nan_d(x);
    g.fp8_amax(amax_d.data(), nan_d.data(), n);
    CHECK(std::isnan(amax_d.get()[0]));
  }
}

}  // namespace

TEST_CASE("every CUDA kernel matches the host kernel in fp32", "[gpu][kernels]") { check_all_kernels<float>(); }
TEST_CASE("every CUDA kernel matches the host kernel in bf16", "[gpu][kernels]") { check_all_kernels<bf16>(); }
TEST_CASE("every CUDA kernel matches the host kernel in fp16", "[gpu][kernels]") { check_all_kernels<fp16>(); }
