// fp16 (common/fp16.hpp) against the IEEE 754 binary16 values by hand and, where the CPU has F16C,
// against the hardware's own conversions (vcvtph2ps / vcvtps2ph, round to nearest even): every one of
// the 65,536 halves and every 97th of the 2^32 float bit patterns (all of them matched when run once).
// Conversions are exact or exactly specified: the comparisons are of bits.
#include <catch2/catch.hpp>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/fp16.hpp"

using namespace dtrain;

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Mismatches of ours against F16C: (to_float over all halves) + (to_fp16 over a stride of floats).
__attribute__((target("f16c"))) long mismatches_against_f16c() {
  long bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h)
    bad += bits_of(to_float(fp16{static_cast<std::uint16_t>(h)})) != bits_of(_cvtsh_ss(static_cast<unsigned short>(h)));
  for (std::uint64_t i = 0; i < (std::uint64_t{1} << 32); i += 97) {
    const auto u = static_cast<std::uint32_t>(i);
    float f;
    std::memcpy(&f, &u, sizeof f);
    bad += to_fp16(f).bits != static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
  }
  return bad;
}

}  // namespace

TEST_CASE("fp16 conversions: values by hand", "[fp16]") {
  CHECK(to_fp16(1.0f).bits == 0x3c00);
  CHECK(to_fp16(-2.0f).bits == 0xc000);
  CHECK(to_fp16(65504.0f).bits == 0x7bff);                // the largest finite half
  CHECK(to_fp16(65519.99f).bits == 0x7bff);               // below the halfway point to 65536
  CHECK(to_fp16(65520.0f).bits == 0x7c00);                // halfway, ties to even: infinity
  CHECK(to_fp16(std::numeric_limits<float>::infinity()).bits == 0x7c00);
  CHECK(to_fp16(0x1p-24f).bits == 0x0001);                // the smallest subnormal
  CHECK(to_fp16(0x1p-25f).bits == 0x0000);                // halfway to it: ties to even, zero
  CHECK(to_fp16(0x1.8p-25f).bits == 0x0001);              // above halfway
  CHECK(to_fp16(0x1p-14f).bits == 0x0400);                // the smallest normal
  CHECK(to_fp16(1.0f + 0x1p-11f).bits == 0x3c00);         // halfway between 1 and 1 + 2^-10: even, 1
  CHECK(to_fp16(1.0f + 0x1.8p-11f).bits == 0x3c01);
  CHECK(to_fp16(-0.0f).bits == 0x8000);
  CHECK((to_fp16(std::nanf("")).bits & 0x7e00) == 0x7e00);  // a quiet NaN
  CHECK(to_float(fp16{0x3555}) == 0x1.554p-2f);            // 1/3 rounded
  CHECK(to_float(fp16{0x0001}) == 0x1p-24f);
  CHECK(to_float(fp16{0xfbff}) == -65504.0f);
  CHECK(std::isinf(to_float(fp16{0x7c00})));
  CHECK(std::isnan(to_float(fp16{0x7d00})));               // a signalling NaN reads as a (quiet) NaN
  for (std::uint32_t h = 0; h < 65536; ++h) {             // every finite half survives the round trip
    const fp16 x{static_cast<std::uint16_t>(h)};
    if (((h >> 10) & 0x1f) != 31) REQUIRE(to_fp16(to_float(x)).bits == x.bits);
  }
}

TEST_CASE("fp16 conversions match the CPU's F16C instructions", "[fp16]") {
  if (!__builtin_cpu_supports("f16c")) {
    WARN("this CPU has no F16C: the hardware comparison is skipped (the values by hand still ran)");
    return;
  }
  CHECK(mismatches_against_f16c() == 0);
}
