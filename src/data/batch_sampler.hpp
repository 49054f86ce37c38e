// Sample selection: which source of the blend and which window of it is global sample j of optimizer
// step s. A pure function of (seed, stream, step, sample), so every parallel layout sees the same global
// batch and a rank can fill just its own slice of it.
#pragma once
#include <cstdint>
#include <string>

#include "data/data_blend.hpp"
#include "data/token_source.hpp"

namespace dtrain {

// Start token of the (seq_length + 1)-token window of global sample `sample` of step `step`:
//   rng::hash(rng::key_of(seed, stream), step * 2^32 + sample) % (num_tokens - seq_length).
// stream is "train" or "val"; needs num_tokens > seq_length and sample < 2^32.
std::uint64_t sample_start(std::uint64_t seed, const std::string& stream, std::uint64_t step, std::uint64_t sample,
                           std::uint64_t num_tokens, int seq_length);

// Global samples [first_sample, first_sample + num_samples) of `step`: inputs are the window's first
// seq_length tokens, targets the same window shifted by one.
void fill_samples(const TokenSource& source, std::uint64_t seed, const std::string& stream, std::uint64_t step,
                  std::uint64_t first_sample, int num_samples, int seq_length,
                  int* inputs /*(num_samples, seq_length)*/, int* targets /*(num_samples, seq_length)*/);

// The same from a blend: each sample from the source blend.choose() names, at the window sample_start
// gives for that source's size.
void fill_samples(const DataBlend& blend, std::uint64_t seed, const std::string& stream, std::uint64_t step,
                  std::uint64_t first_sample, int num_samples, int seq_length,
                  int* inputs /*(num_samples, seq_length)*/, int* targets /*(num_samples, seq_length)*/);

// UserError unless `source` holds at least seq_length + 1 tokens; `what` names it in the message
// (e.g. "token file 'PATH'").
void check_sequence_fits(const TokenSource& source, int seq_length, const std::string& what);

}  // namespace dtrain
