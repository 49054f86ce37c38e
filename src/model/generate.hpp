// Generation from a (whole, unsharded) model: token ids in, sampled token ids out (the caller's
// tokenizer encodes the prompts and decodes the results). With the key/value cache (KvDecoder) each new
// token costs one token's forward pass; without it (use_cache false, or a model the cache does not take)
// every token is a forward pass over the whole context, the reference the cache is tested against.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/gpt.hpp"

namespace dtrain {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy (the most probable token; top_k and top_p do not apply)
  int top_k = 0;             // > 0: sample among the k most probable tokens only
  double top_p = 1.0;        // < 1: among the fewest most probable tokens whose probabilities reach p
  std::uint64_t seed = 0;    // sequence b's token n draws rng::uniform(seed, b * 2^32 + n)
  bool use_cache = true;
};

// The next token from one row of logits over `vocab` ids: greedy, or sampled at the temperature from the
// top-k / top-p (nucleus) set with the uniform draw u in [0, 1).
std::uint32_t sample_token(const float* logits, int vocab, const SamplingOptions& o, double u);

// Receives each step's new ids (one per prompt) as they are made; returning false ends the generation.
using TokenSink = std::function<bool(const std::vector<std::uint32_t>& next)>;

// Continues each prompt (at least one id each) by up to `num_tokens` ids from ids below `vocab` (the
// tokenizer's vocabulary, which the model's vocab_size may pad), handing each step's ids to `sink`. The
// context is the last seq_length tokens: the no-cache path slides it by one token a step; the cache,
// when a sequence fills it, starts again from the last seq_length / 2 tokens. Nothing grows with the
// number of tokens: only the last seq_length of each sequence are kept. Returns the steps made.
long generate(GptModel& model, const std::vector<std::vector<std::uint32_t>>& prompts, int vocab, long num_tokens,
              const SamplingOptions& options, const TokenSink& sink);
// The same, every continuation collected and returned (tests, the closing sample of training).
std::vector<std::vector<std::uint32_t>> generate(GptModel& model, const std::vector<std::vector<std::uint32_t>>& prompts, int vocab,
                                                 int num_tokens, const SamplingOptions& options);

}  // namespace dtrain
