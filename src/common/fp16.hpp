// IEEE 754 binary16 ("half", fp16) as dtrain stores it: sign bit 15, 5 exponent bits (bias 15), 10
// mantissa bits; subnormals below 2^-14, largest finite 65504. Conversions round to nearest even,
// overflow to infinity, and keep NaN a quiet NaN, as the F16C instructions and numpy's float16 do.
// The struct has the layout of CUDA's __half.
#pragma once
#include <cstdint>
#include <cstring>

namespace dtrain {

struct fp16 {
  std::uint16_t bits;
};
static_assert(sizeof(fp16) == 2, "fp16 is two bytes");

inline float to_float(fp16 x) {
  const std::uint32_t sign = static_cast<std::uint32_t>(x.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (x.bits >> 10) & 0x1fu, mantissa = x.bits & 0x3ffu;
  float f;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact in float
    f = static_cast<float>(mantissa) * 0x1p-24f;
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    bits |= sign;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  std::uint32_t bits = exponent == 31 ? sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u)  // inf, quiet NaN
                                      : sign | ((exponent + 112) << 23) | (mantissa << 13);                     // rebias 15 -> 127
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline fp16 to_fp16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: quiet, the payload's top bits kept
    return fp16{static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};
  if (magnitude >= 0x477ff000u) return fp16{static_cast<std::uint16_t>(sign | 0x7c00u)};  // 65520 and above round to infinity
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a subnormal (or zero) in units of 2^-24. Adding 0.5 (whose float ulp is 2^-24)
    // lets the float addition round to that unit, to nearest even; the low mantissa bits are the count.
    float v;
    std::memcpy(&v, &magnitude, sizeof v);
    v += 0.5f;
    std::uint32_t sum;
    std::memcpy(&sum, &v, sizeof sum);
    return fp16{static_cast<std::uint16_t>(sign | (sum - 0x3f000000u))};
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even; a
  // carry moves into the exponent, as it should.
  std::uint32_t r = magnitude - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return fp16{static_cast<std::uint16_t>(sign | (r >> 13))};
}

}  // namespace dtrain
