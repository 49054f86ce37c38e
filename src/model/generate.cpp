// generate: sampling, the key/value-cache path (KvDecoder) and the full-context path.
#include "model/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/counter_rng.hpp"
#include "common/error.hpp"
#include "model/kv_decoder.hpp"

namespace dtrain {

std::uint32_t sample_token(const float* logits, int vocab, const SamplingOptions& o, double u) {
  const int best = static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  if (!(o.temperature > 0)) return static_cast<std::uint32_t>(best);
  const auto weight = [&](int v) { return std::exp((static_cast<double>(logits[v]) - logits[best]) / o.temperature); };
  std::vector<int> order;  // the candidates, most probable first (or every id in order without top-k / top-p)
  if (o.top_k > 0 || o.top_p < 1.0) {
    order.resize(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    const auto before = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    const std::size_t k = o.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(o.top_k), order.size()) : order.size();
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(), before);
    order.resize(k);
    if (o.top_p < 1.0) {  // the fewest most probable whose share of the kept mass reaches p
      double total = 0.0;
      for (const int v : order) total += weight(v);
      double mass = 0.0;
      std::size_t keep = 0;
      while (keep < order.size() && (keep == 0 || mass < o.top_p * total)) mass += weight(order[keep++]);
      order.resize(keep);
    }
  } else {
    order.resize(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
  }
  double total = 0.0;
  for (const int v : order) total += weight(v);
  double left = u * total;
  for (const int v : order)
    if ((left -= weight(v)) <= 0) return static_cast<std::uint32_t>(v);
  return static_cast<std::uint32_t>(order.back());
}

namespace {

double draw(const SamplingOptions& o, std::size_t b, long n) {
  return rng::uniform(o.seed, (static_cast<std::uint64_t>(b) << 32) + static_cast<std::uint64_t>(n));
}

// The last `keep` tokens of a sequence's context, trimmed once it holds twice as many (amortised O(1)).
void append_bounded(std::vector<int>& context, int token, std::size_t keep) {
  context.push_back(token);
  if (context.size() >= 2 * keep) context.erase(context.begin(), context.end() - static_cast<long>(keep));
}

// Every token a forward pass over the last seq_length tokens of each context (activation slot 0, sample
// 0 of the model's micro-batch).
long generate_without_cache(GptModel& model, const std::vector<std::vector<std::uint32_t>>& prompts, int vocab, long num_tokens,
                            const SamplingOptions& o, const TokenSink& sink) {
  const ActivationDims& d = model.dims();
  const std::size_t B = prompts.size();
  std::vector<std::vector<int>> context(B);
  for (std::size_t b = 0; b < B; ++b) context[b].assign(prompts[b].begin(), prompts[b].end());
  std::vector<float> row(static_cast<std::size_t>(d.Vl));
  // The batch: the last T tokens of the context (zeros after it; causal attention never looks there),
  // copied to the model's device for each pass.
  std::vector<int> tokens(static_cast<std::size_t>(d.N()), 0), targets(tokens.size(), 0);
  Device& device = model.device();
  Arena on_device(device, device.is_host() ? 0 : 2 * tokens.size() * sizeof(int));
  const MicroBatch batch = device.is_host() ? MicroBatch{tokens.data(), targets.data()}
                                            : MicroBatch{on_device.as<int>(), on_device.as<int>() + tokens.size()};
  std::vector<std::uint32_t> next(B);
  for (long n = 0; n < num_tokens; ++n) {
    for (std::size_t b = 0; b < B; ++b) {
      const int len = std::min<int>(static_cast<int>(context[b].size()), d.T);
      std::fill(tokens.begin(), tokens.end(), 0);
      std::copy(context[b].end() - len, context[b].end(), tokens.begin());
      if (!device.is_host()) {
        device.copy(on_device.data(), tokens.data(), tokens.size() * sizeof(int));
        device.copy(on_device.as<int>() + tokens.size(), targets.data(), targets.size() * sizeof(int));
      }
      model.forward(0, 0, batch);
      model.logits_row(0, len - 1, row.data());
      next[b] = sample_token(row.data(), vocab, o, draw(o, b, n));
      append_bounded(context[b], static_cast<int>(next[b]), static_cast<std::size_t>(d.T));
    }
    if (!sink(next)) return n + 1;
  }
  return num_tokens;
}

}  // namespace

long generate(GptModel& model, const std::vector<std::vector<std::uint32_t>>& prompts, int vocab, long num_tokens,
              const SamplingOptions& o, const TokenSink& sink) {
  if (!model.part().embedding || !model.part().head) fatal("generation needs the whole model on one rank");
  const ActivationDims& d = model.dims();
  if (vocab < 1 || vocab > d.Vl) fatal("generate: vocab " + std::to_string(vocab) + " is outside the model's vocabulary");
  for (const auto& p : prompts)
    if (p.empty()) throw UserError("a prompt encodes to no tokens; give a longer one");
  const std::size_t B = prompts.size();
  const std::unique_ptr<KvDecoder> decoder = o.use_cache && B > 0 ? model.make_decoder(static_cast<int>(B)) : nullptr;
  if (!decoder) return generate_without_cache(model, prompts, vocab, num_tokens, o, sink);
  const int cap = decoder->capacity();
  std::vector<std::vector<int>> context(B), add(B);
  for (std::size_t b = 0; b < B; ++b) {
    context[b].assign(prompts[b].begin(), prompts[b].end());
    add[b].assign(context[b].end() - std::min<long>(static_cast<long>(context[b].size()), cap), context[b].end());
  }
  std::vector<float> logits(B * static_cast<std::size_t>(d.Vl));
  std::vector<std::uint32_t> next(B);
  for (long n = 0; n < num_tokens; ++n) {
    decoder->extend(add, logits.data());
    for (std::size_t b = 0; b < B; ++b) {
      next[b] = sample_token(logits.data() + b * static_cast<std::size_t>(d.Vl), vocab, o, draw(o, b, n));
      append_bounded(context[b], static_cast<int>(next[b]), static_cast<std::size_t>(cap));
      if (decoder->length(static_cast<int>(b)) < cap) {
        add[b] = {static_cast<int>(next[b])};
        continue;
      }
      // The cache is full: start again from the last half of it (the new token included).
      decoder->clear(static_cast<int>(b));
      add[b].assign(context[b].end() - std::max(1, cap / 2), context[b].end());
    }
    if (!sink(next)) return n + 1;
  }
  return num_tokens;
}

std::vector<std::vector<std::uint32_t>> generate(GptModel& model, const std::vector<std::vector<std::uint32_t>>& prompts, int vocab,
                                                 int num_tokens, const SamplingOptions& o) {
  std::vector<std::vector<std::uint32_t>> out(prompts.size());
  generate(model, prompts, vocab, num_tokens, o, [&](const std::vector<std::uint32_t>& next) {
    for (std::size_t b = 0; b < next.size(); ++b) out[b].push_back(next[b]);
    return true;
  });
  return out;
}

}  // namespace dtrain
