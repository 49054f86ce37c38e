// init_parameters: the initial weights of any rank's tensors from the counter-based RNG keyed by
// (seed, tensor name, global element index), for the whole arena or one range of it.
#include <algorithm>

#include "common/counter_rng.hpp"
#include "model/gpt.hpp"

namespace dtrain {

void init_parameters(const TensorTable& table, std::uint64_t seed, float* values) {
  init_parameters(table, seed, {0, table.total()}, values);
}

void init_parameters(const TensorTable& table, std::uint64_t seed, ArenaRange r, float* values) {
  std::fill(values, values + (r.end - r.begin), 0.0f);
  for (const auto& t : table.tensors()) {
    const std::size_t lo = std::max(r.begin, t.offset), hi = std::min(r.end, t.offset + t.numel);
    if (lo >= hi) continue;
    float* w = values + (lo - r.begin);
    const std::uint64_t key = rng::key_of(seed, t.name);
    for (long i = static_cast<long>(lo - t.offset), end = static_cast<long>(hi - t.offset); i < end; ++i, ++w) {
      switch (t.init) {
        case InitKind::zeros: *w = 0.0f; break;
        case InitKind::ones: *w = 1.0f; break;
        case InitKind::normal: *w = t.init_std * rng::normal(key, static_cast<std::uint64_t>(global_index(t, i))); break;
      }
    }
  }
}

}  // namespace dtrain
