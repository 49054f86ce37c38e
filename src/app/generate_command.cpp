// run_generate: the whole model from its weights file, then generate_text.
#include "app/generate_command.hpp"

#include <cstdio>
#include <vector>

#include "ckpt/weights_file.hpp"
#include "common/error.hpp"
#include "model/generate.hpp"
#include "plan/rank_plan.hpp"

namespace dtrain {

int run_generate(const Config& cfg, const LaunchEnv& env, const GenerateOptions& options, kernels::Backend backend) {
  if (env.world_size != 1) throw UserError("dtrain generate runs on one rank; start it without mpirun/srun or with -np 1");
  if (options.tokens < 0) throw UserError("dtrain generate: --tokens must be >= 0");
  if (!(options.temperature >= 0) || options.temperature > 1e6)
    throw UserError("dtrain generate: --temperature must be a finite number >= 0 (0 = greedy)");
  const std::string weights = options.weights.empty() ? cfg.checkpoint.dir + "/model-final.h5" : options.weights;
  const RankPlan whole = whole_model_plan(cfg, 1);
  std::vector<float> values(whole.arena_size);
  read_weights(weights, whole.table, values.data());
  const std::unique_ptr<GptModel> model = make_gpt_model(whole, nullptr, backend);
  model->set_parameters(values.data());
  const std::string text = generate_text(*model, options.prompt, options.tokens, options.temperature,
                                         options.seed.value_or(cfg.training.seed));
  std::printf("%s%s\n", options.prompt.c_str(), text.c_str());
  return 0;
}

}  // namespace dtrain
