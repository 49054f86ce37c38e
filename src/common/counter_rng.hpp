// Counter-based random numbers: a value is a pure function of (key, counter), so any rank can produce
// element i of a tensor, or sample j of step s, without generating the ones before it. This is what
// makes initial weights and data order independent of the parallel layout.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

namespace dtrain::rng {

// SplitMix64 finaliser: a bijective 64-bit mixer with full avalanche.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t hash(std::uint64_t key, std::uint64_t counter) { return mix64(key ^ mix64(counter)); }

// A key from a seed and a name (FNV-1a of the name), e.g. the key of tensor "h3.qkv_w".
inline std::uint64_t key_of(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return mix64(seed ^ mix64(h));
}

// Uniform in (0, 1), 24 bits, never 0.
inline float uniform(std::uint64_t key, std::uint64_t counter) {
  return (static_cast<float>(hash(key, counter) >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

// Standard normal for element `index` (Box-Muller on two uniforms of its own), computed in double
// so that the result does not depend on the compiler's float contraction choices.
inline float normal(std::uint64_t key, std::uint64_t index) {
  const double u1 = (static_cast<double>(hash(key, 2 * index) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  const double u2 = (static_cast<double>(hash(key, 2 * index + 1) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace dtrain::rng
