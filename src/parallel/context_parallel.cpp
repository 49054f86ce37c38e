// keep_own_chunks: a context-parallel rank's chunks of whole samples.
#include "parallel/context_parallel.hpp"

#include <algorithm>
#include <cstddef>

namespace dtrain {

void keep_own_chunks(const ActivationDims& d, int samples, int seq, const int* whole_tokens, const int* whole_targets, int* tokens,
                     int* targets) {
  const int chunk = d.T / 2;
  for (int b = 0; b < samples; ++b)
    for (int half = 0; half < 2; ++half) {
      const std::size_t from = static_cast<std::size_t>(b) * seq + static_cast<std::size_t>(d.chunk_position(half));
      const std::size_t to = static_cast<std::size_t>(b) * d.T + static_cast<std::size_t>(half) * chunk;
      std::copy_n(whole_tokens + from, chunk, tokens + to);
      std::copy_n(whole_targets + from, chunk, targets + to);
    }
}

}  // namespace dtrain
