// Text generation from a (whole, unsharded) model: byte tokens in, sampled byte tokens out.
#pragma once
#include <cstdint>
#include <string>

#include "model/gpt.hpp"

namespace dtrain {

// Continues `prompt` by `num_tokens` bytes sampled at `temperature` (0 = greedy), seeded by `seed`.
// Uses activation slot 0 of the model; the context is the last seq_length tokens.
std::string generate_text(GptModel& model, const std::string& prompt, int num_tokens, double temperature, std::uint64_t seed);

}  // namespace dtrain
