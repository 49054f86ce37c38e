// Fp8Operands (model/fp8_operands.hpp) on ranks that each hold a piece of one tensor: every piece is
// rounded at the scale of the whole tensor's amax, so that a layout rounds like one rank. The pieces are
// made so that rank 0 holds the tensor's largest magnitude and the others only values about 2^18 (E4M3)
// or 2^31 (E5M2) smaller. A power-of-two scale does not change how a value in the format's normal range
// rounds, only where the subnormal range starts: at the whole tensor's scale these values are subnormal
// or zero, at their piece's own (a missing reduction) they are normal and keep 3 or 2 mantissa bits. Over the
// tensor-parallel group every operand is reduced; over the context-parallel group the activations and
// output gradients (a micro-batch's rows) are, the weights (the same on every rank there) are not.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fp8_math.hpp"
#include "model/fp8_operands.hpp"
#include "support/mpi_over_world.hpp"

using namespace dtrain;
using kernels::Fp8Format;

namespace {

constexpr int kRows = 8, kCols = 8;  // N = IC = OC: the input, the weight and the output gradient have 64 elements each

// Rank r's piece of a tensor: element i is (i - 32) / 10^5 * (r + 1) / world, and rank 0's first element
// is `peak` (the tensor's largest magnitude).
std::vector<bf16> piece(int rank, int world, float peak) {
  std::vector<bf16> x(kRows * kCols);
  for (int i = 0; i < kRows * kCols; ++i) x[static_cast<std::size_t>(i)] = to_bf16((i - 32) / 1e5f * (rank + 1) / world);
  if (rank == 0) x[0] = to_bf16(peak);
  return x;
}

// The piece rounded as one rank holding the whole tensor rounds it: at the scale of `amax`.
std::vector<float> rounded(const std::vector<bf16>& x, float amax, Fp8Format f) {
  std::vector<float> out;
  for (bf16 v : x) out.push_back(kernels::fp8_round(to_float(v), kernels::fp8_scale(amax, f), f));
  return out;
}

std::vector<float> widened(const bf16* x) {
  std::vector<float> out;
  for (int i = 0; i < kRows * kCols; ++i) out.push_back(to_float(x[i]));
  return out;
}

}  // namespace

TEST_CASE("fp8 operands are rounded at the scale of the whole tensor's amax", "[mpi][fp8]") {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto group = testing::mpi_over_world();
  const TensorParallel tp(*group);
  std::vector<bf16> input(kRows * kCols), weight(kRows * kCols), grad(kRows * kCols);
  float amax = 0.0f;
  Scratch<bf16> sc{};
  sc.fp8_input = input.data();
  sc.fp8_weight = weight.data();
  sc.fp8_grad = grad.data();
  sc.fp8_amax = &amax;
  const kernels::KernelTable<bf16>& k = kernels::kernel_table<bf16>(kernels::Backend::host);
  const std::vector<bf16> x = piece(rank, world, 100.0f), w = piece(rank, world, 300.0f), dy = piece(rank, world, 1e6f);
  float local_amax = 0.0f;  // of this rank's weight piece alone
  for (bf16 v : w) local_amax = std::max(local_amax, std::fabs(to_float(v)));

  SECTION("over tensor parallelism: inputs, weights and output gradients") {
    Fp8Operands<bf16> fp8(k, sc, &tp, nullptr);
    REQUIRE(fp8.on());
    const auto f = fp8.forward(x.data(), w.data(), kRows, kCols, kCols);
    CHECK(widened(f.x) == rounded(x, 100.0f, Fp8Format::e4m3));
    CHECK(widened(f.w) == rounded(w, 300.0f, Fp8Format::e4m3));
    const auto b = fp8.backward(dy.data(), x.data(), w.data(), nullptr, kRows, kCols, kCols);
    CHECK(widened(b.dy) == rounded(dy, to_float(to_bf16(1e6f)), Fp8Format::e5m2));
    CHECK(widened(b.x) == rounded(x, 100.0f, Fp8Format::e4m3));
    if (rank > 0) {  // the pieces tell a reduced amax from a local one
      CHECK(widened(f.w) != rounded(w, local_amax, Fp8Format::e4m3));
      float local_grad_amax = 0.0f;
      for (bf16 v : dy) local_grad_amax = std::max(local_grad_amax, std::fabs(to_float(v)));
      CHECK(widened(b.dy) != rounded(dy, local_grad_amax, Fp8Format::e5m2));
    }
  }
  SECTION("over context parallelism: the micro-batch's rows, not the weights") {
    Fp8Operands<bf16> fp8(k, sc, nullptr, group.get());
    const auto b = fp8.backward(dy.data(), x.data(), w.data(), nullptr, kRows, kCols, kCols);
    CHECK(widened(b.dy) == rounded(dy, to_float(to_bf16(1e6f)), Fp8Format::e5m2));
    CHECK(widened(b.x) == rounded(x, 100.0f, Fp8Format::e4m3));
    CHECK(widened(b.w) == rounded(w, local_amax, Fp8Format::e4m3));
  }
  SECTION("the bias gradient is the column sums of the unrounded output gradient") {
    Fp8Operands<bf16> fp8(k, sc, &tp, nullptr);
    std::vector<float> dbias(kCols, 1.0f), expected(kCols, 1.0f);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c) expected[static_cast<std::size_t>(c)] += to_float(dy[static_cast<std::size_t>(r * kCols + c)]);
    const auto b = fp8.backward(dy.data(), x.data(), w.data(), dbias.data(), kRows, kCols, kCols);
    CHECK(b.dbias == nullptr);
    CHECK(dbias == expected);
  }
}
