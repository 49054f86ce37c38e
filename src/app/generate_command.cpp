// run_generate: the whole model from its weights file, then the tokenizer of data.tokenizer around generate_tokens.
#include "app/generate_command.hpp"

#include <cstdio>
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
  const std::vector<std::uint32_t> prompt = tokenizer->encode(options.prompt.empty() ? "\n" : options.prompt);
  const std::vector<std::uint32_t> ids = generate_tokens(*model, prompt, tokenizer->vocab_size(), options.tokens,
                                                         options.temperature, options.seed.value_or(cfg.training.seed));
  const std::string text = tokenizer->decode(ids);
  std::printf("%s%s\n", options.prompt.c_str(), text.c_str());
  return 0;
}

}  // namespace dtrain
