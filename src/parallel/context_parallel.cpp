// keep_own_chunks: a context-parallel rank's chunks of whole samples.
#include "parallel/context_parallel.hpp"

#include <algorithm>
#include <cstddef>

namespace dtrain {

void keep_own_chunks(const ActivationDims& d, int samples, int seq, const std::uint32_t* whole, std::uint32_t* mine) {
  const int chunk = d.T / 2;
  for (int b = 0; b < samples; ++b)
    for (int half = 0; half < 2; ++half) {
      const std::size_t from = static_cast<std::size_t>(b) * seq + static_cast<std::size_t>(d.chunk_position(half));
      const std::size_t to = static_cast<std::size_t>(b) * d.T + static_cast<std::size_t>(half) * chunk;
      std::copy_n(whole + from, chunk, mine + to);
    }
}

}  // namespace dtrain
