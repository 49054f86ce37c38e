// generate_tokens: repeated forward passes over a sliding context, sampling from the last position.
#include "model/generate.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/counter_rng.hpp"
#include "common/error.hpp"

namespace dtrain {

std::vector<std::uint32_t> generate_tokens(GptModel& model, const std::vector<std::uint32_t>& prompt, int vocab, int num_tokens,
                                           double temperature, std::uint64_t seed) {
  if (!model.part().embedding || !model.part().head) fatal("generation needs the whole model on one rank");
  const ActivationDims& d = model.dims();
  if (vocab < 1 || vocab > d.Vl) fatal("generate_tokens: vocab " + std::to_string(vocab) + " is outside the model's vocabulary");
  if (prompt.empty()) throw UserError("the prompt encodes to no tokens; give a longer one");
  std::vector<int> context(prompt.begin(), prompt.end());
  std::vector<std::uint32_t> out;
  std::vector<double> probs(static_cast<std::size_t>(vocab));
  std::vector<float> row(static_cast<std::size_t>(d.Vl));
  // The batch: the last T tokens of the context (zeros after it; causal attention never looks there),
  // copied to the model's device for each pass.
  std::vector<int> tokens(static_cast<std::size_t>(d.N()), 0), targets(tokens.size(), 0);
  Device& device = model.device();
  Arena on_device(device, device.is_host() ? 0 : 2 * tokens.size() * sizeof(int));
  const MicroBatch batch = device.is_host() ? MicroBatch{tokens.data(), targets.data()}
                                            : MicroBatch{on_device.as<int>(), on_device.as<int>() + tokens.size()};
  for (int n = 0; n < num_tokens; ++n) {
    const int len = std::min<int>(static_cast<int>(context.size()), d.T);
    std::fill(tokens.begin(), tokens.end(), 0);
    std::copy(context.end() - len, context.end(), tokens.begin());
    if (!device.is_host()) {
      device.copy(on_device.data(), tokens.data(), tokens.size() * sizeof(int));
      device.copy(on_device.as<int>() + tokens.size(), targets.data(), targets.size() * sizeof(int));
    }
    model.forward(0, 0, batch);
    model.logits_row(0, len - 1, row.data());
    const float* logits = row.data();
    int next = static_cast<int>(std::max_element(logits, logits + vocab) - logits);
    if (temperature > 0) {
      double total = 0.0;
      for (int v = 0; v < vocab; ++v) total += probs[v] = std::exp((logits[v] - logits[next]) / temperature);
      double u = rng::uniform(seed, static_cast<std::uint64_t>(n)) * total;
      for (int v = 0; v < vocab; ++v)
        if ((u -= probs[v]) <= 0) {
          next = v;
          break;
        }
    }
    context.push_back(next);
    out.push_back(static_cast<std::uint32_t>(next));
  }
  return out;
}

}  // namespace dtrain
