// The fp8 formats of kernels/fp8_math.hpp against the OCP 8-bit floating-point specification (OFP8 v1.0:
// its table of special values and limits, by hand) and, in CUDA builds, against an implementation we did
// not write: CUDA's cuda_fp8.h host conversions (__nv_cvt_fp8_to_halfraw, __nv_cvt_float_to_fp8 with
// __NV_SATFINITE, which go through double). Every one of the 256 codes of each format is decoded by both;
// encoding is compared on every midpoint between neighbouring codes and the floats on either side of it
// (where round-to-nearest-even decides), every bf16 value and every 997th float bit pattern. Then the
// per-tensor scale: powers of two, amax fits, a scaled tensor's values are what bf16 holds.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/bf16.hpp"
#include "common/fp16.hpp"
#include "dtrain_config.hpp"
#include "kernels/fp8_math.hpp"
#if DTRAIN_HAS_CUDA
#include <cuda_fp8.h>
#endif

using namespace dtrain;
using kernels::Fp8Format;

namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

// Every float at which rounding to the format is decided: each code's value, the midpoints between
// neighbouring finite values, the floats just beside each, the values around the largest, and both signs.
std::vector<float> deciding_floats(Fp8Format f) {
  std::vector<float> finite;
  for (int c = 0; c < 128; ++c) {
    const float v = kernels::fp8_decode(static_cast<std::uint8_t>(c), f);
    if (std::isfinite(v)) finite.push_back(v);
  }
  std::vector<float> out;
  const float inf = std::numeric_limits<float>::infinity();
  auto add_around = [&](float x) {
    for (float y : {x, std::nextafter(x, -inf), std::nextafter(x, inf)}) {
      out.push_back(y);
      out.push_back(-y);
    }
  };
  for (std::size_t i = 0; i < finite.size(); ++i) {
    add_around(finite[i]);
    if (i + 1 < finite.size()) add_around(0.5f * (finite[i] + finite[i + 1]));  // exact: spacing of a power of two
  }
  const float max = kernels::fp8_max(f), top_spacing = max - finite[finite.size() - 2];
  for (float x : {max + 0.5f * top_spacing, max + top_spacing, 2 * max, inf, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()})
    add_around(x);
  return out;
}

bool same_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

TEST_CASE("fp8 formats hold the OCP specification's limits and special values", "[fp8]") {
  using kernels::fp8_decode;
  using kernels::fp8_encode;
  // E4M3: bias 7, largest 448 = S.1111.110, NaN S.1111.111, no infinity; smallest subnormal 2^-9,
  // smallest normal 2^-6.
  CHECK(fp8_decode(0x7E, Fp8Format::e4m3) == 448.0f);
  CHECK(std::isnan(fp8_decode(0x7F, Fp8Format::e4m3)));
  CHECK(std::isnan(fp8_decode(0xFF, Fp8Format::e4m3)));
  CHECK(fp8_decode(0x78, Fp8Format::e4m3) == 256.0f);
  CHECK(fp8_decode(0x01, Fp8Format::e4m3) == std::ldexp(1.0f, -9));
  CHECK(fp8_decode(0x08, Fp8Format::e4m3) == std::ldexp(1.0f, -6));
  CHECK(fp8_decode(0x38, Fp8Format::e4m3) == 1.0f);
  CHECK(fp8_decode(0xB8, Fp8Format::e4m3) == -1.0f);
  // E5M2: bias 15, largest 57344 = S.11110.11, infinity S.11111.00, NaN S.11111.{01,10,11}; smallest
  // subnormal 2^-16, smallest normal 2^-14.
  CHECK(fp8_decode(0x7B, Fp8Format::e5m2) == 57344.0f);
  CHECK(fp8_decode(0x7C, Fp8Format::e5m2) == std::numeric_limits<float>::infinity());
  CHECK(fp8_decode(0xFC, Fp8Format::e5m2) == -std::numeric_limits<float>::infinity());
  for (int c : {0x7D, 0x7E, 0x7F}) CHECK(std::isnan(fp8_decode(static_cast<std::uint8_t>(c), Fp8Format::e5m2)));
  CHECK(fp8_decode(0x01, Fp8Format::e5m2) == std::ldexp(1.0f, -16));
  CHECK(fp8_decode(0x04, Fp8Format::e5m2) == std::ldexp(1.0f, -14));
  CHECK(fp8_decode(0x3C, Fp8Format::e5m2) == 1.0f);
  // Saturation and ties to even.
  CHECK(fp8_encode(1e30f, Fp8Format::e4m3) == 0x7E);
  CHECK(fp8_encode(-std::numeric_limits<float>::infinity(), Fp8Format::e5m2) == 0xFB);
  CHECK(fp8_encode(464.0f, Fp8Format::e4m3) == 0x7E);    // the midpoint to the NaN code's 480 saturates
  CHECK(fp8_encode(1.0625f, Fp8Format::e4m3) == 0x38);   // halfway between 1 and 1.125: to 1 (even)
  CHECK(fp8_encode(1.1875f, Fp8Format::e4m3) == 0x3A);   // halfway between 1.125 and 1.25: to 1.25 (even)
  CHECK(fp8_encode(std::ldexp(1.0f, -10), Fp8Format::e4m3) == 0x00);  // half the smallest subnormal: to 0
  CHECK(fp8_encode(std::ldexp(1.5f, -10), Fp8Format::e4m3) == 0x01);
  for (Fp8Format f : kFormats)
    for (int c = 0; c < 256; ++c) {  // every finite code encodes back to itself (zero: its sign)
      const float v = fp8_decode(static_cast<std::uint8_t>(c), f);
      if (std::isfinite(v)) CHECK(fp8_encode(v, f) == c);
    }
}

#if DTRAIN_HAS_CUDA
TEST_CASE("fp8 conversions match CUDA's cuda_fp8.h on all 256 codes and every rounding decision", "[fp8]") {
  for (Fp8Format f : kFormats) {
    const auto cuda_kind = f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
    INFO((f == Fp8Format::e4m3 ? "e4m3" : "e5m2"));
    long bad_decodes = 0;
    for (int c = 0; c < 256; ++c) {
      const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), cuda_kind);
      bad_decodes += !same_value(kernels::fp8_decode(static_cast<std::uint8_t>(c), f), to_float(fp16{h.x}));
    }
    CHECK(bad_decodes == 0);
    // Encoding: the NaN codes may differ in their payload, so codes are compared as values.
    auto mismatches = [&](const std::vector<float>& xs) {
      long bad = 0;
      for (float x : xs) {
        const std::uint8_t ours = kernels::fp8_encode(x, f), theirs = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, cuda_kind);
        bad += !same_value(kernels::fp8_decode(ours, f), kernels::fp8_decode(theirs, f)) || (ours & 0x80) != (theirs & 0x80);
      }
      return bad;
    };
    const std::vector<float> deciding = deciding_floats(f);
    CHECK(deciding.size() > 1400);
    CHECK(mismatches(deciding) == 0);
    std::vector<float> sweep;
    for (std::uint32_t b = 0; b < 65536; ++b) sweep.push_back(to_float(bf16{static_cast<std::uint16_t>(b)}));
    for (std::uint64_t i = 0; i < (std::uint64_t{1} << 32); i += 997)
      sweep.push_back(kernels::fp8_float_from_bits(static_cast<std::uint32_t>(i)));
    CHECK(mismatches(sweep) == 0);
  }
}
#endif

TEST_CASE("fp8 scales are powers of two that fit amax, and scaled values are exact in bf16", "[fp8]") {
  for (Fp8Format f : kFormats) {
    const float max = kernels::fp8_max(f);
    for (float amax : {1e-30f, 3e-5f, 0.37f, 1.0f, 448.0f, 449.0f, 57344.0f, 6e4f, 1e20f, 3e38f}) {
      const float s = kernels::fp8_scale(amax, f);
      int e = 0;
      CHECK(std::frexp(s, &e) == 0.5f);  // a power of two
      if (s < std::ldexp(1.0f, 100)) {
        CHECK(amax * s <= max);
        CHECK(amax * s * 2 > max);  // the largest such power
      }
    }
    CHECK(kernels::fp8_scale(0.0f, f) == 1.0f);
    CHECK(kernels::fp8_scale(std::numeric_limits<float>::infinity(), f) == 1.0f);
    CHECK(kernels::fp8_scale(std::nanf(""), f) == 1.0f);
    // A tensor's values decode(encode(x s)) / s: exact in bf16, at most half a spacing from x.
    const float amax = 3.1f, s = kernels::fp8_scale(amax, f);
    const int m = kernels::fp8_mantissa_bits(f);
    for (int i = -1000; i <= 1000; ++i) {
      const float x = amax * static_cast<float>(i) / 1000.0f, r = kernels::fp8_decode(kernels::fp8_encode(x * s, f), f) / s;
      CHECK(to_float(to_bf16(r)) == r);
      if (std::fabs(x * s) >= std::ldexp(1.0f, 1 - kernels::fp8_exponent_bias(f)))  // normal: relative error <= 2^-(m+1)
        CHECK(std::fabs(r - x) <= std::ldexp(std::fabs(x), -(m + 1)));
    }
  }
  // The running maximum ignores order and keeps NaN.
  CHECK(std::isnan(kernels::fp8_amax_combine(kernels::fp8_amax_combine(0.0f, std::nanf("")), 5.0f)));
  CHECK(std::isnan(kernels::fp8_amax_combine(5.0f, std::nanf(""))));
  CHECK(kernels::fp8_amax_combine(kernels::fp8_amax_combine(0.0f, 2.0f), 1.0f) == 2.0f);
}
