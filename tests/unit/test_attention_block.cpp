// Ring attention's pieces (attention_block_forward / attention_block_backward) against the
// whole-sequence attention kernels (themselves checked against a double reference and finite
// differences in test_kernels_host.cpp): a sequence cut into 2 x cp chunks, each query chunk merged
// over the key/value chunks it may see (earlier chunks whole, its own causally) in the order ring
// attention visits them, gives the same output and the same q, k, v gradients; with documents packed
// in the sequence (doc_start) and with a sliding window too, each block seeing only its rows' documents
// and windows (one first visible key per row, kernels/attention_visibility.hpp).
// Tolerance: the block form sums the softmax in another order and normalises once per block (online
// softmax), so results differ from the whole-row softmax by the rounding of reordered sums. Each output,
// log-sum-exp and gradient is a sum over at most the T keys (or queries) of products formed over the
// head's HD values (scores, and dout . v, dout . out in the backward pass): n = T + 2 HD terms, each at
// most the largest result in size (inputs in [-1, 1], softmax weights summing to 1; the first row sees
// only itself, so the largest output is a whole v). Two orders of such sums differ by at most 2 n u
// (u = 2^-24) of the largest value: 3.8e-6 at T = 16, 5.7e-6 at 32, 3.4e-5 at 256. A wrong mask, a
// missing block or a bad merge is 1e-2 or worse.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention_scratch.hpp"
#include "kernels/kernels.hpp"

namespace k = dtrain::kernels::host;

namespace {

using Vec = std::vector<float>;

Vec random_vec(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Vec v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

double relative_max_error(const Vec& got, const Vec& want) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return worst / scale;
}

// The zig-zag cut: rank r of cp holds chunks r and 2cp-1-r; ring step s brings the key/values of rank
// (r - s) mod cp. Returns, for each rank, the (query chunk, key chunk) pairs in the order visited.
std::vector<std::vector<std::pair<int, int>>> ring_pairs(int cp) {
  std::vector<std::vector<std::pair<int, int>>> all(static_cast<std::size_t>(cp));
  for (int r = 0; r < cp; ++r)
    for (int s = 0; s < cp; ++s) {
      const int src = (r - s + cp) % cp;
      for (int qc : {r, 2 * cp - 1 - r})
        for (int kc : {src, 2 * cp - 1 - src})
          if (kc <= qc) all[static_cast<std::size_t>(r)].push_back({qc, kc});
    }
  return all;
}

// doc_start: the sequence's document starts (T values), or empty for one document; window: the sliding
// window (0: none).
void check_ring(int T, int cp, int NH, int NKV, int HD, unsigned seed, const std::vector<int>& doc_start = {}, int window = 0) {
  const dtrain::kernels::KeyVisibility ds{doc_start.empty() ? nullptr : doc_start.data(), window};
  std::mt19937 rng(seed);
  const int W = (NH + 2 * NKV) * HD, C = NH * HD, KW = 2 * NKV * HD, Tc = T / (2 * cp);
  const Vec qkv = random_vec(rng, static_cast<std::size_t>(T) * W);
  const Vec dout = random_vec(rng, static_cast<std::size_t>(T) * C);
  // The whole sequence at once (B = 1).
  Vec out(static_cast<std::size_t>(T) * C), whole_lse(static_cast<std::size_t>(NH) * T), scratch(dtrain::kernels::attention_scratch_floats(1, T, NH));
  k::attention_forward(out.data(), whole_lse.data(), scratch.data(), qkv.data(), ds, 1, T, NH, NKV, HD);
  Vec dqkv(qkv.size());
  k::attention_backward(dqkv.data(), scratch.data(), dout.data(), out.data(), whole_lse.data(), qkv.data(), ds, 1, T, NH, NKV, HD);

  // Block by block: outputs and log-sum-exps per query chunk, gradients accumulated in fp32.
  Vec kv(static_cast<std::size_t>(T) * KW);
  k::copy_columns(kv.data(), qkv.data(), T, W, C, KW);
  Vec bout(out.size(), 0.0f), lse(static_cast<std::size_t>(2 * cp) * NH * Tc, -std::numeric_limits<float>::infinity());
  Vec bscratch(static_cast<std::size_t>(NH) * 2 * Tc * Tc);
  const auto pairs = ring_pairs(cp);
  int visited = 0;
  for (const auto& rank : pairs)
    for (auto [qc, kc] : rank) {
      k::attention_block_forward(bout.data() + static_cast<long>(qc) * Tc * C, lse.data() + static_cast<long>(qc) * NH * Tc,
                                 bscratch.data(), qkv.data() + static_cast<long>(qc) * Tc * W, W,
                                 kv.data() + static_cast<long>(kc) * Tc * KW, KW, Tc, Tc, NH, NKV, HD, qc * Tc, kc * Tc,
                                 ds.from_row(qc * Tc));
      ++visited;
    }
  CHECK(visited == 2 * cp * (2 * cp + 1) / 2);  // every causal chunk pair exactly once
  Vec dq(static_cast<std::size_t>(T) * C, 0.0f), dkv(kv.size(), 0.0f);
  for (const auto& rank : pairs)
    for (auto [qc, kc] : rank)
      k::attention_block_backward(dq.data() + static_cast<long>(qc) * Tc * C, dkv.data() + static_cast<long>(kc) * Tc * KW, KW,
                                  bscratch.data(), dout.data() + static_cast<long>(qc) * Tc * C, bout.data() + static_cast<long>(qc) * Tc * C,
                                  lse.data() + static_cast<long>(qc) * NH * Tc, qkv.data() + static_cast<long>(qc) * Tc * W, W,
                                  kv.data() + static_cast<long>(kc) * Tc * KW, KW, Tc, Tc, NH, NKV, HD, qc * Tc, kc * Tc,
                                  ds.from_row(qc * Tc));
  Vec got(qkv.size());
  k::narrow_columns(got.data(), dq.data(), T, W, 0, C);
  k::narrow_columns(got.data(), dkv.data(), T, W, C, KW);

  INFO("T=" << T << " cp=" << cp << " NH=" << NH << " NKV=" << NKV << " HD=" << HD);
  const double tolerance = 2.0 * (T + 2 * HD) * 0x1p-24;
  CHECK(relative_max_error(bout, out) <= tolerance);
  // The blocks' log-sum-exp (2cp chunks, NH, Tc) against the whole sequence's (NH, T).
  Vec chunked_lse(whole_lse.size());
  for (int c = 0; c < 2 * cp; ++c)
    for (int h = 0; h < NH; ++h)
      for (int i = 0; i < Tc; ++i)
        chunked_lse[(static_cast<std::size_t>(c) * NH + h) * Tc + i] = whole_lse[static_cast<std::size_t>(h) * T + c * Tc + i];
  CHECK(relative_max_error(lse, chunked_lse) <= tolerance);
  CHECK(relative_max_error(got, dqkv) <= tolerance);
}

}  // namespace

TEST_CASE("ring attention blocks equal whole-sequence attention", "[kernels][cp]") {
  SECTION("cp=2, multi-head") { check_ring(16, 2, 3, 3, 8, 301); }
  SECTION("cp=4, grouped-query") { check_ring(32, 4, 4, 2, 8, 302); }
  SECTION("cp=1 (two chunks of one rank), long rows") { check_ring(256, 1, 2, 1, 16, 303); }
}

// Document starts of a sequence of T tokens whose documents have the given lengths (the last one runs
// to T).
std::vector<int> documents(int T, const std::vector<int>& lengths) {
  std::vector<int> ds(static_cast<std::size_t>(T));
  int start = 0, next = 0;
  std::size_t d = 0;
  for (int t = 0; t < T; ++t) {
    if (t == next) {
      start = t;
      next = d < lengths.size() ? t + lengths[d++] : T;
    }
    ds[static_cast<std::size_t>(t)] = start;
  }
  return ds;
}

TEST_CASE("ring attention blocks equal whole-sequence attention with packed documents", "[kernels][cp][documents]") {
  // Boundaries inside chunks, on chunk edges (8, 16 with Tc = 8 at cp=2 and 4 at cp=4), a one-token
  // document and a document spanning three chunks.
  SECTION("cp=2") { check_ring(32, 2, 3, 3, 8, 311, documents(32, {5, 3, 8, 1, 12})); }
  SECTION("cp=4, grouped-query") { check_ring(32, 4, 4, 2, 8, 312, documents(32, {4, 14, 1, 6})); }
}

TEST_CASE("ring attention blocks equal whole-sequence attention with a sliding window", "[kernels][cp][window]") {
  // Windows shorter than a chunk (whole chunks fall outside a row's window), across chunk edges, and
  // with packed documents.
  SECTION("cp=2, window 5") { check_ring(32, 2, 3, 3, 8, 321, {}, 5); }
  SECTION("cp=4, grouped-query, window 11") { check_ring(32, 4, 4, 2, 8, 322, {}, 11); }
  SECTION("cp=2, window 9 and documents") { check_ring(32, 2, 2, 1, 8, 323, documents(32, {5, 20, 7}), 9); }
}

TEST_CASE("copy_columns, insert_columns and narrow_columns move exactly their columns", "[kernels][cp]") {
  const int N = 3, W = 7, col = 2, w = 3;
  Vec inp(N * W);
  for (int i = 0; i < N * W; ++i) inp[static_cast<std::size_t>(i)] = static_cast<float>(i);
  Vec packed(N * w);
  k::copy_columns(packed.data(), inp.data(), N, W, col, w);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < w; ++c) CHECK(packed[static_cast<std::size_t>(r * w + c)] == inp[static_cast<std::size_t>(r * W + col + c)]);
  Vec back(N * W, -1.0f);
  k::narrow_columns(back.data(), packed.data(), N, W, col, w);
  Vec inserted(N * W, -1.0f);
  k::insert_columns(inserted.data(), packed.data(), N, W, col, w);
  CHECK(inserted == back);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < W; ++c)
      CHECK(back[static_cast<std::size_t>(r * W + c)] == (c >= col && c < col + w ? inp[static_cast<std::size_t>(r * W + c)] : -1.0f));
}
