// Operands for timing a GEMM: uniform values in [-1, 1) from the counter-based RNG, as float,
// bf16 or fp16. Never zeros: tensor cores run measurably faster on zero operands (about 13% on an H200 in
// bf16), so a peak timed on zeros would overstate the ceiling that MFU divides by.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/storage_type.hpp"
#include "common/counter_rng.hpp"

namespace dtrain {

// Writes `count` elements of T (float, bf16 or fp16) to `out`.
template <typename T>
void fill_gemm_operand(T* out, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = 0; i < count; ++i) out[i] = from_float<T>(2.0f * rng::uniform(seed, i) - 1.0f);
}

}  // namespace dtrain
