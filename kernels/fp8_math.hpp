// The OCP 8-bit floating-point formats (OFP8, v1.0) and the per-tensor scaling of system.precision =
// fp8, written once for the host kernels, the CUDA kernels and the tests.
// - E4M3 ("E4M3FN"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN, the
//   largest finite value 448 (S.1111.110), the smallest subnormal 2^-9.
// - E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like: S.11111.00 is infinity, S.11111.xx
//   (xx != 0) NaN, the largest finite value 57344, the smallest subnormal 2^-16.
// Encoding rounds to nearest even and saturates: a magnitude beyond the largest finite value (infinity
// included) becomes the largest finite value, NaN stays NaN (cvt.rn.satfinite, __NV_SATFINITE).
// A tensor is scaled by a power of two s from its amax (the largest magnitude) so that amax * s fits the
// format, and stored as the codes of x * s: its values are decode(code) / s, exactly, and the product of
// two such values is exact in fp32, so a GEMM on the codes that multiplies by 1 / (s_a s_b) at the end
// (cuBLASLt's scales) and one on the decoded values (the host) differ in the order of their sums only.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/host_device.hpp"

namespace dtrain::kernels {

enum class Fp8Format : int { e4m3 = 0, e5m2 = 1 };

DTRAIN_HOST_DEVICE inline int fp8_mantissa_bits(Fp8Format f) { return f == Fp8Format::e4m3 ? 3 : 2; }
DTRAIN_HOST_DEVICE inline int fp8_exponent_bias(Fp8Format f) { return f == Fp8Format::e4m3 ? 7 : 15; }
DTRAIN_HOST_DEVICE inline float fp8_max(Fp8Format f) { return f == Fp8Format::e4m3 ? 448.0f : 57344.0f; }

DTRAIN_HOST_DEVICE inline std::uint32_t fp8_float_bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
DTRAIN_HOST_DEVICE inline float fp8_float_from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// The value of an 8-bit code (exact in fp32).
DTRAIN_HOST_DEVICE inline float fp8_decode(std::uint8_t code, Fp8Format f) {
  const int m = fp8_mantissa_bits(f), bias = fp8_exponent_bias(f);
  const int exponent_field = (code & 0x7F) >> m, mantissa = code & ((1 << m) - 1);
  const int top = (1 << (7 - m)) - 1;  // the all-ones exponent field
  float v;
  if (f == Fp8Format::e4m3 && exponent_field == top && mantissa == (1 << m) - 1)
    v = fp8_float_from_bits(0x7FC00000u);
  else if (f == Fp8Format::e5m2 && exponent_field == top)
    v = mantissa ? fp8_float_from_bits(0x7FC00000u) : fp8_float_from_bits(0x7F800000u);
  else if (exponent_field == 0)
    v = std::ldexp(static_cast<float>(mantissa), 1 - bias - m);  // subnormal
  else
    v = std::ldexp(static_cast<float>((1 << m) | mantissa), exponent_field - bias - m);
  return (code & 0x80) ? -v : v;
}

// y rounded to the format's values, to nearest even, saturating at the largest finite value (y finite
// or infinite, not NaN). In the normal range the fp32 bits are rounded to the format's mantissa bits,
// below it y is rounded to a multiple of the smallest subnormal by adding and subtracting a power of two
// whose spacing that is (fp32 addition rounds to nearest even; IEEE arithmetic, no -ffast-math here).
DTRAIN_HOST_DEVICE inline float fp8_round_value(float y, Fp8Format f) {
  const int m = fp8_mantissa_bits(f), min_exponent = 1 - fp8_exponent_bias(f);
  const float a = std::fabs(y), max = fp8_max(f);
  float r;
  if (a >= max) {
    r = max;
  } else if (a >= std::ldexp(1.0f, min_exponent)) {
    const int drop = 23 - m;  // fp32 mantissa bits below the format's
    std::uint32_t bits = fp8_float_bits(a);
    bits += ((1u << (drop - 1)) - 1u) + ((bits >> drop) & 1u);
    bits &= ~((1u << drop) - 1u);
    r = fp8_float_from_bits(bits);
    if (r > max) r = max;
  } else {
    const float shift = std::ldexp(1.0f, min_exponent - m + 23);
    r = (a + shift) - shift;
  }
  return std::copysign(r, y);
}

// The code nearest to x (ties to even), saturating to the largest finite value; any NaN gives the NaN
// code 0.1111.111 (E4M3) or 0.11111.11 (E5M2), as cvt.rn.satfinite does.
DTRAIN_HOST_DEVICE inline std::uint8_t fp8_encode(float x, Fp8Format f) {
  if (x != x) return 0x7F;
  const int m = fp8_mantissa_bits(f), min_exponent = 1 - fp8_exponent_bias(f);
  const std::uint32_t bits = fp8_float_bits(fp8_round_value(x, f));
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t magnitude_bits = bits & 0x7FFFFFFFu;
  const int exponent = static_cast<int>(magnitude_bits >> 23) - 127;
  int code;
  if (magnitude_bits == 0)
    code = 0;
  else if (exponent < min_exponent)  // subnormal: the value in units of the smallest subnormal, exactly
    code = static_cast<int>(std::ldexp(fp8_float_from_bits(magnitude_bits), m - min_exponent));
  else
    code = ((exponent - min_exponent + 1) << m) | static_cast<int>((magnitude_bits >> (23 - m)) & ((1u << m) - 1u));
  return static_cast<std::uint8_t>(sign | code);
}

// The per-tensor scale for a tensor whose largest magnitude is amax: the largest power of two s with
// amax * s <= the format's largest value (2^100 at most); 1 where amax is 0 or not finite. Multiplying
// by s, and dividing a decoded value by it, are exact.
DTRAIN_HOST_DEVICE inline float fp8_scale(float amax, Fp8Format f) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  int e_amax = 0, e_max = 0;
  const float r_amax = std::frexp(amax, &e_amax), r_max = std::frexp(fp8_max(f), &e_max);
  int k = e_max - e_amax - (r_max < r_amax ? 1 : 0);
  if (k > 100) k = 100;
  return std::ldexp(1.0f, k);
}

// The running maximum of fp8_amax: the larger magnitude, NaN once either is NaN (so the result does
// not depend on the order of the elements).
DTRAIN_HOST_DEVICE inline float fp8_amax_combine(float running, float magnitude) {
  if (running != running) return running;
  return (magnitude != magnitude || magnitude > running) ? magnitude : running;
}

}  // namespace dtrain::kernels
