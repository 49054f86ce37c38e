// The scratch the fused attention kernels (attention_forward/backward of kernel_api.inc) need, in
// floats: the host backend works on blocks of kAttentionRows query rows against all T keys (a scores
// tile and a gradient tile per head), the CUDA backend keeps D = rowsum(dout * out) per (sample, head,
// row). Both fit in NH x T x max(2 x min(T, kAttentionRows), B) floats: linear in T, not quadratic.
#pragma once
#include <algorithm>
#include <cstddef>

namespace dtrain::kernels {

constexpr int kAttentionRows = 128;  // query rows per host tile

constexpr std::size_t attention_scratch_floats(long B, long T, long NH) {
  return static_cast<std::size_t>(NH) * static_cast<std::size_t>(T) *
         static_cast<std::size_t>(std::max(2 * std::min(T, static_cast<long>(kAttentionRows)), B));
}

}  // namespace dtrain::kernels
