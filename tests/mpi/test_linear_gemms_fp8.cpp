// LinearGemms (model/linear_gemms.hpp) in fp8 runs. (1) On ranks that each hold a piece of one tensor,
// every piece is quantized at the scale of the whole tensor's amax, so that a layout quantizes like one
// rank: over the tensor-parallel group every operand's amax is reduced, over the context-parallel group
// the activations' and output gradients' (a micro-batch's rows), not the weights' (the same on every
// rank there). Rank 0 holds the largest magnitude; the others only values about 2^18 (E4M3) or 2^31
// (E5M2) smaller. A power-of-two scale does not change how a value in the format's normal range rounds,
// only where the subnormal range starts, so a missing reduction would show only on such values.
// (2) A layer's forward and backward against the same products computed here in double from the
// operands quantized with kernels/fp8_math.hpp (whose formats test_fp8.cpp checks against CUDA's): the
// products of two fp8 values are exact, so the GEMMs differ from the reference by their fp32 sums' order
// (2 K u of the terms' magnitudes, Higham 4.2) and the output's one rounding to bf16 (2^-8); the bias
// gradient is the unrounded output gradient's column sums.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/fp8_math.hpp"
#include "model/linear_gemms.hpp"
#include "support/mpi_over_world.hpp"

using namespace dtrain;
using kernels::Fp8Format;

namespace {

// A Scratch with host buffers for an fp8 layer of up to n elements per operand.
struct Fp8Buffers {
  explicit Fp8Buffers(std::size_t n) : codes(6, std::vector<std::uint8_t>(n)), amax(3) {
    sc.fp8_x = codes[0].data();
    sc.fp8_x_t = codes[1].data();
    sc.fp8_w = codes[2].data();
    sc.fp8_w_t = codes[3].data();
    sc.fp8_dy = codes[4].data();
    sc.fp8_dy_t = codes[5].data();
    sc.fp8_amax = amax.data();
  }
  std::vector<std::vector<std::uint8_t>> codes;
  std::vector<float> amax;
  Scratch<bf16> sc{};
};

// Rank r's piece of a tensor: element i is (i - 32) / 10^5 * (r + 1) / world, and rank 0's first element
// is `peak` (the tensor's largest magnitude).
std::vector<bf16> piece(int rank, int world, float peak) {
  std::vector<bf16> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<std::size_t>(i)] = to_bf16((i - 32) / 1e5f * (rank + 1) / world);
  if (rank == 0) x[0] = to_bf16(peak);
  return x;
}

float local_amax(const std::vector<bf16>& x) {
  float m = 0.0f;
  for (bf16 v : x) m = std::max(m, std::fabs(to_float(v)));
  return m;
}

// x's values as one rank quantizes them at the scale of `amax`.
std::vector<double> quantized(const std::vector<bf16>& x, float amax, Fp8Format f) {
  const float s = kernels::fp8_scale(amax, f);
  std::vector<double> out;
  for (bf16 v : x) out.push_back(static_cast<double>(kernels::fp8_decode(kernels::fp8_encode(to_float(v) * s, f), f)) / s);
  return out;
}

std::vector<bf16> random_bf16(std::mt19937& gen, std::size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<bf16> v(n);
  for (auto& x : v) x = to_bf16(d(gen));
  return v;
}

// Entries got(i, j) of a rows x cols result that are not init(j) + sum over t < terms of a(i, t) b(j, t)
// (in double) within the fp32 sums' reordering (2 terms u of the magnitudes, u = 2^-24) and, for a bf16
// output, its one rounding (2^-8).
template <typename Got, typename A, typename B, typename Init>
long mismatches(Got got, long rows, long cols, long terms, A a, B b, Init init, bool bf16_output) {
  long bad = 0;
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) {
      double sum = init(j), magnitudes = std::abs(sum);
      for (long t = 0; t < terms; ++t) {
        sum += a(i, t) * b(j, t);
        magnitudes += std::abs(a(i, t) * b(j, t));
      }
      const double bound = 2.0 * (terms + 1) * 0x1p-24 * magnitudes + (bf16_output ? 0x1p-8 * std::abs(sum) : 0.0);
      bad += std::abs(got(i, j) - sum) > bound;
    }
  return bad;
}

}  // namespace

TEST_CASE("fp8 operands take the amax of the whole tensor", "[mpi][fp8]") {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto group = testing::mpi_over_world();
  const TensorParallel tp(*group);
  const auto& k = kernels::kernel_table<bf16>(kernels::Backend::host);
  WeightGrads<bf16> wg(k);
  Fp8Buffers b(64);
  const std::vector<bf16> x = piece(rank, world, 100.0f), w = piece(rank, world, 300.0f), dy = piece(rank, world, 1e6f);
  using G = LinearGemms<bf16>;
  SECTION("over tensor parallelism: inputs, weights and output gradients") {
    G g(k, wg, b.sc, &tp, nullptr);
    REQUIRE(g.fp8());
    CHECK(*g.reduced_amax(G::kX, x.data(), 64, true) == 100.0f);
    CHECK(*g.reduced_amax(G::kW, w.data(), 64, false) == 300.0f);
    CHECK(*g.reduced_amax(G::kDy, dy.data(), 64, true) == to_float(to_bf16(1e6f)));
  }
  SECTION("over context parallelism: the micro-batch's rows, not the weights") {
    G g(k, wg, b.sc, nullptr, group.get());
    CHECK(*g.reduced_amax(G::kX, x.data(), 64, true) == 100.0f);
    CHECK(*g.reduced_amax(G::kW, w.data(), 64, false) == local_amax(w));
    CHECK(*g.reduced_amax(G::kDy, dy.data(), 64, true) == to_float(to_bf16(1e6f)));
  }
  if (rank > 0) {  // the pieces tell a reduced amax from a local one
    CHECK(quantized(w, 300.0f, Fp8Format::e4m3) != quantized(w, local_amax(w), Fp8Format::e4m3));
    CHECK(quantized(dy, 1e6f, Fp8Format::e5m2) != quantized(dy, local_amax(dy), Fp8Format::e5m2));
  }
}

TEST_CASE("an fp8 layer computes the products of its quantized operands", "[mpi][fp8]") {
  constexpr long N = 24;
  constexpr int IC = 40, OC = 32;
  const auto& k = kernels::kernel_table<bf16>(kernels::Backend::host);
  WeightGrads<bf16> wg(k);
  Fp8Buffers b(std::max<std::size_t>({N * IC, N * OC, OC * IC}));
  LinearGemms<bf16> g(k, wg, b.sc, nullptr, nullptr);
  std::mt19937 gen(7);
  const auto x = random_bf16(gen, N * IC, 1.0f), w = random_bf16(gen, OC * IC, 0.05f), dy = random_bf16(gen, N * OC, 1e-3f),
             bias = random_bf16(gen, OC, 0.1f);
  const auto qx = quantized(x, local_amax(x), Fp8Format::e4m3), qw = quantized(w, local_amax(w), Fp8Format::e4m3),
             qdy = quantized(dy, local_amax(dy), Fp8Format::e5m2);
  std::vector<bf16> out(N * OC), dinp(N * IC);
  std::vector<float> dweight(OC * IC, 0.5f), dbias(OC, 0.25f);
  g.forward({out.data(), nullptr}, x.data(), w.data(), bias.data(), N, IC, OC);
  g.backward({dinp.data(), nullptr}, dweight.data(), dbias.data(), dy.data(), x.data(), w.data(), N, IC, OC);
  auto at = [](const auto& v, long i) { return static_cast<double>(to_float(v[static_cast<std::size_t>(i)])); };
  // out = x w^T + bias; dinp = dy w; dweight = 0.5 + dy^T x; dbias = 0.25 + the column sums of dy.
  CHECK(mismatches([&](long i, long j) { return at(out, i * OC + j); }, N, OC, IC, [&](long i, long c) { return qx[i * IC + c]; },
                   [&](long j, long c) { return qw[j * IC + c]; }, [&](long j) { return at(bias, j); }, true) == 0);
  CHECK(mismatches([&](long i, long c) { return at(dinp, i * IC + c); }, N, IC, OC, [&](long i, long j) { return qdy[i * OC + j]; },
                   [&](long c, long j) { return qw[j * IC + c]; }, [](long) { return 0.0; }, true) == 0);
  CHECK(mismatches([&](long j, long c) { return at(dweight, j * IC + c); }, OC, IC, N, [&](long j, long i) { return qdy[i * OC + j]; },
                   [&](long c, long i) { return qx[i * IC + c]; }, [](long) { return 0.5; }, false) == 0);
  CHECK(mismatches([&](long, long j) { return at(dbias, j); }, 1, OC, N, [](long, long) { return 1.0; },
                   [&](long j, long i) { return at(dy, i * OC + j); }, [](long) { return 0.25; }, false) == 0);
  // The operands really were quantized: most outputs are not the products of the unquantized ones.
  CHECK(mismatches([&](long i, long j) { return at(out, i * OC + j); }, N, OC, IC, [&](long i, long c) { return at(x, i * IC + c); },
                   [&](long j, long c) { return at(w, j * IC + c); }, [&](long j) { return at(bias, j); }, true) > N * OC / 2);
}
