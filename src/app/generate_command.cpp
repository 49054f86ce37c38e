// run_generate: the whole model from its weights file, then the tokenizer of data.tokenizer around
// generate (a prompt, or a file of prompts as one batch), with the tokens per second on stderr.
#include "app/generate_command.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "ckpt/compatibility.hpp"
#include "ckpt/weights_file.hpp"
#include "config/load.hpp"
#include "common/error.hpp"
#include "model/generate.hpp"
#include "plan/rank_plan.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {

int run_generate(const Config& cfg, const LaunchEnv& env, const GenerateOptions& options, kernels::Backend backend) {
  if (env.world_size != 1) throw UserError("dtrain generate runs on one rank; start it without mpirun/srun or with -np 1");
  if (options.tokens < 0) throw UserError("dtrain generate: --tokens must be >= 0");
  if (!(options.temperature >= 0) || options.temperature > 1e6)
    throw UserError("dtrain generate: --temperature must be a finite number >= 0 (0 = greedy)");
  if (options.top_k < 0) throw UserError("dtrain generate: --top-k must be >= 0 (0 = every token)");
  if (!(options.top_p > 0 && options.top_p <= 1)) throw UserError("dtrain generate: --top-p must be in (0, 1]");
  // The prompts: --prompt, or the lines of --prompts ("\n" in a line stands for a newline).
  std::vector<std::string> texts;
  if (!options.prompts_file.empty()) {
    std::ifstream in(options.prompts_file);
    if (!in) throw UserError("dtrain generate: cannot read the prompts file '" + options.prompts_file + "'");
    for (std::string line; std::getline(in, line);) {
      for (std::size_t at; (at = line.find("\\n")) != std::string::npos;) line.replace(at, 2, "\n");
      if (!line.empty()) texts.push_back(line);
    }
    if (texts.empty()) throw UserError("dtrain generate: the prompts file '" + options.prompts_file + "' has no prompt (one a line)");
    if (texts.size() > 4096) throw UserError("dtrain generate: at most 4096 prompts in one batch");
  } else {
    texts.push_back(options.prompt.empty() ? "\n" : options.prompt);
  }
  const std::string weights = options.weights.empty() ? cfg.checkpoint.dir + "/model-final.h5" : options.weights;
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(cfg.data.tokenizer);
  const WeightsMeta meta = weights_meta(weights);
  if (!meta.config_text.empty())
    check_same_model(load_config(meta.config_text, weights + " (stored configuration)", {}), cfg, "weights file '" + weights + "'",
                     "the weights file");
  if (meta.tokenizer == kUnrecordedTokenizer)
    std::fprintf(stderr, "dtrain generate: warning: weights file '%s' does not record its tokenizer; data.tokenizer=%s must be "
                 "the one the model was trained with\n", weights.c_str(), cfg.data.tokenizer.c_str());
  else
    check_made_with(cfg.data.tokenizer, tokenizer->identity(), meta.tokenizer, "weights file '" + weights + "'");
  check_vocab_fits(*tokenizer, cfg.model.vocab_size, "weights file '" + weights + "'");
  const RankPlan whole = whole_model_plan(cfg, 1);
  std::vector<float> values(whole.arena_size);
  read_weights(weights, whole.table, values.data());
  const std::unique_ptr<GptModel> model = make_gpt_model(whole, nullptr, backend);
  model->set_parameters(values.data());
  std::vector<std::vector<std::uint32_t>> prompts;
  for (const std::string& t : texts) prompts.push_back(tokenizer->encode(t));
  SamplingOptions sampling;
  sampling.temperature = options.temperature, sampling.top_k = options.top_k, sampling.top_p = options.top_p;
  sampling.seed = options.seed.value_or(cfg.training.seed), sampling.use_cache = !options.no_cache;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::vector<std::uint32_t>> ids = generate(*model, prompts, tokenizer->vocab_size(), options.tokens, sampling);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (std::size_t b = 0; b < ids.size(); ++b) {
    if (ids.size() > 1) std::printf("=== prompt %zu\n", b + 1);
    std::printf("%s%s\n", texts[b].c_str(), tokenizer->decode(ids[b]).c_str());
  }
  std::fprintf(stderr, "dtrain generate: %zu x %d tokens in %.2f s (%.1f tokens/s, %s)\n", ids.size(), options.tokens, seconds,
               static_cast<double>(ids.size()) * options.tokens / std::max(seconds, 1e-9),
               options.no_cache ? "no key/value cache" : "key/value cache");
  return 0;
}

}  // namespace dtrain
