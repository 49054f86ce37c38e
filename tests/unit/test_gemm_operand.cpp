// The operands the GPU's GEMM peak is timed on (runtime/gemm_operand.hpp) are real data, not zeros.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <type_traits>
#include <vector>

#include "runtime/gemm_operand.hpp"

using namespace dtrain;

TEMPLATE_TEST_CASE("GEMM peak operands are uniform in [-1, 1), never zero, in fp32, bf16 and fp16", "", float, bf16, fp16) {
  const std::size_t n = 100000;
  std::vector<TestType> x(n);
  fill_gemm_operand(x.data(), n, 42);
  double sum = 0.0, sum_abs = 0.0;
  std::set<float> distinct;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = to_float(x[i]);
    REQUIRE(v != 0.0f);
    REQUIRE(std::fabs(v) <= 1.0f);
    sum += v;
    sum_abs += std::fabs(v);
    distinct.insert(v);
  }
  // Uniform on [-1, 1): mean 0 and mean |x| 1/2, each with standard deviation <= 0.58/sqrt(n) = 0.0018;
  // 0.01 is over five of them. 16-bit rounding moves |x| by at most 2^-9 relative, far inside.
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(std::fabs(sum_abs / n - 0.5) < 0.01);
  // bf16 has 2^8 values per binade (fp16 2^11) and about 8 binades carry nearly all of the mass.
  CHECK(distinct.size() > (std::is_same_v<TestType, float> ? n / 2 : 1000u));
}
