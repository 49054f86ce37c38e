// run_generate: the whole model from its weights file, then generate_text.
#include "app/generate_command.hpp"

#include <cstdio>

#include "ckpt/weights_file.hpp"
#include "common/error.hpp"
#include "model/generate.hpp"
#include "plan/rank_plan.hpp"

namespace dtrain {

int run_generate(const Config& cfg, const LaunchEnv& env, const GenerateOptions& options, const kernels::KernelTable& k) {
  if (env.world_size != 1) throw UserError("dtrain generate runs on one rank; start it without mpirun/srun or with -np 1");
  if (options.tokens < 0) throw UserError("dtrain generate: --tokens must be >= 0");
  if (!(options.temperature >= 0) || options.temperature > 1e6)
    throw UserError("dtrain generate: --temperature must be a finite number >= 0 (0 = greedy)");
  const std::string weights = options.weights.empty() ? cfg.checkpoint.dir + "/model-final.h5" : options.weights;
  GptModel model(whole_model_plan(cfg, 1), nullptr, k);
  read_weights(weights, model.table(), model.params());
  const std::string text = generate_text(model, options.prompt, options.tokens, options.temperature,
                                         options.seed.value_or(cfg.training.seed));
  std::printf("%s%s\n", options.prompt.c_str(), text.c_str());
  return 0;
}

}  // namespace dtrain
