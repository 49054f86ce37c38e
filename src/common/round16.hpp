// fp32 values rounded into a 16-bit storage type, bfloat16 or IEEE half, as dtrain's files store them
// (consolidated HDF5 files, Hugging Face safetensors): to nearest even, each value's bit pattern.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/bf16.hpp"
#include "common/fp16.hpp"

namespace dtrain {

enum class Type16 { bf16, fp16 };

// Writes the 16-bit patterns of in[0, n) to out; returns the index of the first value the type cannot
// hold (it rounds to infinity: beyond 65504 in fp16), or n when every value fits.
inline std::size_t round_to_16(Type16 type, const float* in, std::size_t n, std::uint16_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    float back;
    if (type == Type16::fp16) {
      const fp16 h = to_fp16(in[i]);
      out[i] = h.bits, back = to_float(h);
    } else {
      const bf16 b = to_bf16(in[i]);
      out[i] = b.bits, back = to_float(b);
    }
    if (!std::isfinite(back)) return i;
  }
  return n;
}

}  // namespace dtrain
