// Layout-independent sample selection from a token source or a blend, keyed by the counter-based RNG.
#include "data/batch_sampler.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/counter_rng.hpp"
#include "common/error.hpp"

namespace dtrain {
namespace {

std::uint64_t start_from_key(std::uint64_t key, std::uint64_t step, std::uint64_t sample, std::uint64_t num_tokens,
                             int seq_length) {
  if (seq_length <= 0 || num_tokens <= static_cast<std::uint64_t>(seq_length) || sample >> 32 != 0) {
    throw std::invalid_argument("sample_start: needs 0 < seq_length < num_tokens and sample < 2^32 (seq_length=" +
                                std::to_string(seq_length) + ", num_tokens=" + std::to_string(num_tokens) +
                                ", sample=" + std::to_string(sample) + ")");
  }
  return rng::hash(key, (step << 32) + sample) % (num_tokens - static_cast<std::uint64_t>(seq_length));
}

// One sample: the (T+1)-token window of `source` that `key` picks, through `window` (T+1), split into
// inputs and targets (T each).
void fill_one(const TokenSource& source, std::uint64_t key, std::uint64_t step, std::uint64_t sample, int seq_length, int* window,
              int* inputs, int* targets) {
  const std::size_t T = static_cast<std::size_t>(seq_length);
  source.read(start_from_key(key, step, sample, source.size(), seq_length), seq_length + 1, window);
  std::copy(window, window + T, inputs);
  std::copy(window + 1, window + T + 1, targets);
}

}  // namespace

std::uint64_t sample_start(std::uint64_t seed, const std::string& stream, std::uint64_t step, std::uint64_t sample,
                           std::uint64_t num_tokens, int seq_length) {
  return start_from_key(rng::key_of(seed, stream), step, sample, num_tokens, seq_length);
}

void fill_samples(const TokenSource& source, std::uint64_t seed, const std::string& stream, std::uint64_t step,
                  std::uint64_t first_sample, int num_samples, int seq_length, int* inputs, int* targets) {
  const std::uint64_t key = rng::key_of(seed, stream);
  const std::size_t T = static_cast<std::size_t>(seq_length);
  std::vector<int> window(T + 1);
  for (int i = 0; i < num_samples; ++i)
    fill_one(source, key, step, first_sample + static_cast<std::uint64_t>(i), seq_length, window.data(), inputs + i * T, targets + i * T);
}

void fill_samples(const DataBlend& blend, std::uint64_t seed, const std::string& stream, std::uint64_t step,
                  std::uint64_t first_sample, int num_samples, int seq_length, int* inputs, int* targets) {
  const std::uint64_t key = rng::key_of(seed, stream), offset = DataBlend::stream_offset(seed, stream);
  const std::size_t T = static_cast<std::size_t>(seq_length);
  std::vector<int> window(T + 1);
  for (int i = 0; i < num_samples; ++i) {
    const std::uint64_t sample = first_sample + static_cast<std::uint64_t>(i);
    fill_one(blend.source(blend.choose_at(offset, step, sample)), key, step, sample, seq_length, window.data(), inputs + i * T,
             targets + i * T);
  }
}

void check_sequence_fits(const TokenSource& source, int seq_length, const std::string& what) {
  if (source.size() < static_cast<std::uint64_t>(seq_length) + 1) {
    throw UserError(what + " has " + std::to_string(source.size()) +
                    " tokens, fewer than model.seq_length+1 = " + std::to_string(seq_length + 1) +
                    "; use a shorter seq_length or more text");
  }
}

}  // namespace dtrain
