// The operands the GPU's GEMM peak is timed on (runtime/gemm_operand.hpp) are real data, not zeros.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "common/bf16.hpp"
#include "runtime/gemm_operand.hpp"

using namespace dtrain;

TEST_CASE("GEMM peak operands are uniform in [-1, 1), never zero, in fp32 and bf16") {
  const std::size_t n = 100000;
  for (const bool as_bf16 : {false, true}) {
    std::vector<unsigned char> bytes(n * (as_bf16 ? 2 : 4));
    fill_gemm_operand(bytes.data(), n, as_bf16, 42);
    double sum = 0.0, sum_abs = 0.0;
    std::set<float> distinct;
    for (std::size_t i = 0; i < n; ++i) {
      float v;
      if (as_bf16) {
        bf16 b;
        std::memcpy(&b.bits, bytes.data() + 2 * i, 2);
        v = to_float(b);
      } else {
        std::memcpy(&v, bytes.data() + 4 * i, 4);
      }
      REQUIRE(v != 0.0f);
      REQUIRE(std::fabs(v) <= 1.0f);
      sum += v;
      sum_abs += std::fabs(v);
      distinct.insert(v);
    }
    // Uniform on [-1, 1): mean 0 and mean |x| 1/2, each with standard deviation <= 0.58/sqrt(n) = 0.0018;
    // 0.01 is over five of them. bf16 rounding moves |x| by at most 2^-9 relative, far inside.
    CHECK(std::fabs(sum / n) < 0.01);
    CHECK(std::fabs(sum_abs / n - 0.5) < 0.01);
    // bf16 has 2^8 values per binade and about 8 binades carry nearly all of the mass.
    CHECK(distinct.size() > (as_bf16 ? 1000u : n / 2));
  }
}
