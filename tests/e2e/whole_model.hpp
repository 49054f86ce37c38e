// The whole model of an input file with the weights of a weights file, on the host: what the drivers
// that check dtrain's model against PyTorch (model_logits, model_grads) start from.
#pragma once
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/weights_file.hpp"
#include "config/load.hpp"
#include "model/gpt.hpp"
#include "plan/rank_plan.hpp"

namespace dtrain::testing {

struct WholeModel {
  Config cfg;
  std::unique_ptr<GptModel> model;
};

inline WholeModel load_whole_model(const std::string& ini, const std::string& weights) {
  std::ifstream in(ini);
  std::stringstream text;
  text << in.rdbuf();
  WholeModel m{load_config(text.str(), ini, {}), nullptr};
  const RankPlan whole = whole_model_plan(m.cfg, 1);
  std::vector<float> values(whole.arena_size);
  read_weights(weights, whole.table, values.data());
  m.model = make_gpt_model(whole, nullptr, kernels::Backend::host);
  m.model->set_parameters(values.data());
  return m;
}

}  // namespace dtrain::testing
