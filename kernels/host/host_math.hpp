// Shared helpers of the host kernels: a branch-free, NaN-propagating expf that gcc vectorises, the GELU
// constants, and lane-split reductions (fixed summation order, so results are bit-reproducible without
// -ffast-math). Everything here is header-only and inlines into the kernels' inner loops.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

namespace dtrain::kernels::host {

// Every elementwise / per-row kernel runs on this space (Serial in this build).
using HostExec = Kokkos::DefaultHostExecutionSpace;
using HostRange = Kokkos::RangePolicy<HostExec>;

// Elementwise kernels split n elements into chunks of this many; each chunk is one plain inner loop.
constexpr long kChunk = 8192;

// Lanes of the split accumulators: 16 floats = two AVX2 registers, enough independent chains to hide
// the add latency. Each lane is its own running sum, so no reassociation is needed to vectorise.
constexpr int kLanes = 16;

// All-ones if the float with these bits is a NaN (either sign), else 0. Integer ops only.
inline std::int32_t nan_mask(std::int32_t bits) { return (0x7f800000 - (bits & 0x7fffffff)) >> 31; }

// Order-preserving map float -> int32: key = bits ^ (sign ? 0x7fffffff : 0), so integer order on keys is
// the float order (-0 sorts just below +0), and every NaN maps to INT32_MAX (above +inf).
inline std::int32_t float_key(float x) {
  std::int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::int32_t key = bits ^ ((bits >> 31) & 0x7fffffff);
  const std::int32_t nan = nan_mask(bits);
  return (key & ~nan) | (nan & 0x7fffffff);
}
// Inverse of float_key (INT32_MAX gives a NaN).
inline float key_float(std::int32_t key) {
  const std::int32_t bits = key ^ ((key >> 31) & 0x7fffffff);
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// exp(x) for x clamped to [-87, 88], so the result is always a finite normal float (exp(-inf) gives
// ~1.6e-38 instead of 0); NaN in gives NaN out. Cody-Waite range reduction x = k ln2 + r, |r| <= ln2/2,
// the Cephes expf polynomial e^r = 1 + r + r^2 P5(r), then scaling by 2^k built in the exponent bits.
// Max relative error 8.5e-8 (checked against double exp on every float in [-87, 88]).
// No branches, no selects on floats, no calls, no table: gcc vectorises loops that call it.
inline float fast_exp(float x) {
  // Clamp in the integer domain: a float compare-and-select here lets gcc split the loop body into a
  // constant path and a computed one (jump threading + sinking), control flow that it will not
  // vectorise under the default -ftrapping-math. Integer min/max on the order-preserving keys is safe.
  // (The plain key, without float_key's NaN mapping: a NaN is restored at the end anyway.)
  std::int32_t in_bits;
  std::memcpy(&in_bits, &x, sizeof in_bits);
  std::int32_t key = in_bits ^ ((in_bits >> 31) & 0x7fffffff);
  constexpr std::int32_t kKeyMinus87 = static_cast<std::int32_t>(0xc2ae0000u ^ 0x7fffffffu);  // -87.0f
  constexpr std::int32_t kKey88 = 0x42b00000;                                                  // 88.0f
  key = key < kKeyMinus87 ? kKeyMinus87 : key;
  key = key > kKey88 ? kKey88 : key;
  x = key_float(key);
  // k = round(x / ln2) via the 1.5*2^23 trick (round-to-nearest-even in the FPU, no floor call):
  // t = x/ln2 + 1.5*2^23 holds k in its low mantissa bits, and t - 1.5*2^23 = k exactly.
  const float shifter = 12582912.0f;
  const float t = x * 1.44269504088896341f + shifter;
  const float kf = t - shifter;
  // r = x - k ln2 in two steps; ln2 = C1 + C2 with C1 = 0.693359375 exact in a few bits.
  float r = x - kf * 0.693359375f;
  r = r + kf * 2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // 2^k: k in [-126, 127], so k+127 in [1, 254], a normal exponent. bits(t) = bits(1.5*2^23) + k, and
  // bits(1.5*2^23) << 23 vanishes mod 2^32, so (bits(t) + 127) << 23 is the exponent field of 2^k.
  // (No float->int conversion: that may trap, and gcc would then refuse to if-convert.)
  std::uint32_t tbits;
  std::memcpy(&tbits, &t, sizeof tbits);
  const std::uint32_t ebits = (tbits + 127u) << 23;
  float scale;
  std::memcpy(&scale, &ebits, sizeof scale);
  // NaN in: OR a quiet-NaN pattern into the result (integer ops, no select).
  float result = p * scale;
  std::uint32_t rbits;
  std::memcpy(&rbits, &result, sizeof rbits);
  rbits |= static_cast<std::uint32_t>(nan_mask(in_bits)) & 0x7fc00000u;
  std::memcpy(&result, &rbits, sizeof result);
  return result;
}

// GELU tanh approximation constants: u = sqrt(2/pi) * (x + 0.044715 x^3).
constexpr float kGeluS = 0.7978845608028654f;   // sqrt(2/pi)
constexpr float kGeluC = 0.044715f;

// Sum of x[0..n) in a fixed order: kLanes interleaved float chains, then the lanes added in order.
inline float lane_sum(const float* __restrict__ x /*(n)*/, long n) {
  float acc[kLanes] = {};
  long i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += x[i];
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// Dot product of a[0..n) and b[0..n) in a fixed order (kLanes split accumulators).
inline float lane_dot(const float* __restrict__ a /*(n)*/, const float* __restrict__ b /*(n)*/, long n) {
  float acc[kLanes] = {};
  long i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// Max of x[0..n), n >= 1; NaN if any element is NaN. Taken on the integer keys: an integer max is a
// reduction gcc vectorises as is, while a float compare-and-select reduction needs
// -ffinite-math-only -fno-signed-zeros. Exact, so the order does not matter.
inline float lane_max(const float* __restrict__ x /*(n)*/, long n) {
  std::int32_t m = float_key(x[0]);
  for (long i = 1; i < n; ++i) {
    const std::int32_t key = float_key(x[i]);
    m = key > m ? key : m;
  }
  return key_float(m);
}

// Sum of fast_exp(x[i] - shift) over i in [0, n), fixed order (float lanes, flushed to double every
// kExpBlock elements so long rows such as a 50k vocabulary keep full float accuracy).
inline float lane_sum_exp(const float* __restrict__ x /*(n)*/, float shift, long n) {
  constexpr long kExpBlock = 1024;
  double total = 0.0;
  long i = 0;
  while (i < n) {
    const long end = i + kExpBlock < n ? i + kExpBlock : n;
    float acc[kLanes] = {};
    for (; i + kLanes <= end; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += fast_exp(x[i + l] - shift);
    for (int l = 0; i < end; ++i, ++l) acc[l] += fast_exp(x[i] - shift);
    float s = 0.0f;
    for (int l = 0; l < kLanes; ++l) s += acc[l];
    total += s;
  }
  return static_cast<float>(total);
}

}  // namespace dtrain::kernels::host
