// bfloat16 as dtrain stores it: the upper 16 bits of an IEEE float (8-bit exponent, 7-bit mantissa).
// Conversions round to nearest even and keep NaN a NaN. The struct has the layout of CUDA's
// __nv_bfloat16, so device code reinterprets the same memory.
#pragma once
#include <cstdint>
#include <cstring>

namespace dtrain {

struct bf16 {
  std::uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 is two bytes");

inline float to_float(bf16 x) {
  const std::uint32_t bits = static_cast<std::uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline bf16 to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((bits >> 16) | 0x0040u)};  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return bf16{static_cast<std::uint16_t>(bits >> 16)};
}

}  // namespace dtrain
