// RoPE's angular frequency of each rotated pair, shared by the host and CUDA kernels and the tests.
// inv_freq[i] = 1 / base^(2i/R) in fp32, as Hugging Face and Megatron compute it; with Llama 3.1's
// scaling (rope_type "llama3"), a pair whose wavelength 2 pi / inv_freq exceeds
// original_context / low_freq_factor turns `factor` times slower, one below
// original_context / high_freq_factor is kept, and the ones between blend the two with
// smooth = (original_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor):
// (1 - smooth) inv_freq / factor + smooth inv_freq (transformers' _compute_llama3_parameters, fp32, in
// its operations' order: PyTorch computes a scalar over a tensor as the tensor's reciprocal times the
// scalar, so 2 pi / inv_freq is (1 / inv_freq) * 2 pi here too).
#pragma once
#include <cmath>

#include "kernels/host_device.hpp"

namespace dtrain::kernels {

struct RopeFrequencies {
  float base = 10000.0f;
  float factor = 0.0f;  // 0: no scaling; else Llama 3.1's remapping with the fields below
  float low_freq_factor = 1.0f, high_freq_factor = 4.0f, original_context = 8192.0f;
};

// Pair i of the R rotated dims of a head.
DTRAIN_HOST_DEVICE inline float rope_inv_freq(const RopeFrequencies& f, int i, int R) {
  const float inv_freq = 1.0f / powf(f.base, static_cast<float>(2 * i) / static_cast<float>(R));
  if (f.factor == 0.0f) return inv_freq;
  const float wavelength = (1.0f / inv_freq) * 6.28318530717958647692f;
  if (wavelength < f.original_context / f.high_freq_factor) return inv_freq;
  if (wavelength > f.original_context / f.low_freq_factor) return inv_freq / f.factor;
  const float smooth = ((1.0f / wavelength) * f.original_context - f.low_freq_factor) / (f.high_freq_factor - f.low_freq_factor);
  return (1.0f - smooth) * inv_freq / f.factor + smooth * inv_freq;
}

}  // namespace dtrain::kernels
