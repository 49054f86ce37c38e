// Operands for timing a GEMM: uniform values in [-1, 1) from the counter-based RNG, as float or bf16
// bits. Never zeros: tensor cores run measurably faster on zero operands (about 13% on an H200 in
// bf16), so a peak timed on zeros would overstate the ceiling that MFU divides by.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/bf16.hpp"
#include "common/counter_rng.hpp"

namespace dtrain {

// Writes `count` elements (4 bytes each as float, 2 as bf16) to `out`.
inline void fill_gemm_operand(void* out, std::size_t count, bool bf16_elements, std::uint64_t seed) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = 2.0f * rng::uniform(seed, i) - 1.0f;
    if (bf16_elements) {
      const std::uint16_t bits = to_bf16(v).bits;
      std::memcpy(static_cast<char*>(out) + 2 * i, &bits, 2);
    } else {
      std::memcpy(static_cast<char*>(out) + 4 * i, &v, 4);
    }
  }
}

}  // namespace dtrain
