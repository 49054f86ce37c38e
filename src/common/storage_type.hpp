// The storage types of the model's compute tensors: float (fp32 runs), bf16 and fp16 (the two 16-bit
// mixed-precision runs). to_float widens any of them; from_float<T> rounds a float into T (to nearest
// even), so code templated on the storage type converts with one spelling.
#pragma once
#include "common/bf16.hpp"
#include "common/fp16.hpp"

namespace dtrain {

inline float to_float(float x) { return x; }
template <typename T>
T from_float(float f);
template <>
inline float from_float<float>(float f) {
  return f;
}
template <>
inline bf16 from_float<bf16>(float f) {
  return to_bf16(f);
}
template <>
inline fp16 from_float<fp16>(float f) {
  return to_fp16(f);
}

}  // namespace dtrain
