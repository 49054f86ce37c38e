// Generation from a (whole, unsharded) model: token ids in, sampled token ids out (the caller's
// tokenizer encodes the prompt and decodes the result).
#pragma once
#include <cstdint>
#include <string>

#include <vector>

#include "model/gpt.hpp"

namespace dtrain {

// Continues `prompt` (at least one id) by `num_tokens` ids sampled at `temperature` (0 = greedy),
// seeded by `seed`, from ids below `vocab`: the tokenizer's vocabulary, which the model's vocab_size
// may pad. Uses activation slot 0 of the model; the context is the last seq_length tokens.
std::vector<std::uint32_t> generate_tokens(GptModel& model, const std::vector<std::uint32_t>& prompt, int vocab, int num_tokens,
                                           double temperature, std::uint64_t seed);

}  // namespace dtrain
