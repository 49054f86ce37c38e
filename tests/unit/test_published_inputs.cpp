// The published configurations in inputs/ (Qwen3 8B, 32B and 235B-A22B, Mistral 7B, Mixtral 8x7B) plan
// on the layouts their comments name: the checks of a dry run (the configuration, the layout against the world size, every
// stage's memory against system.memory_budget_gb), the model's size from its tensor table against the
// published parameter counts, and per-rank memory within the budget. The numbers printed here are the
// README's predictions.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "config/load.hpp"
#include "config/validate.hpp"
#include "plan/layout_checks.hpp"
#include "plan/model_flops.hpp"
#include "plan/rank_plan.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;

namespace {

Config published(const std::string& name) {
  std::ifstream in(std::string(DTRAIN_SOURCE_DIR) + "/inputs/" + name);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  Config cfg = load_config(text.str(), name, {});
  validate_config(cfg);
  return cfg;
}

// Parameters of the whole model (its tensor table on one rank), in billions.
double billions(const Config& cfg) { return static_cast<double>(whole_model_plan(cfg, 1).table.total()) / 1e9; }

void check_plan(const std::string& name, int world, double published_billions) {
  INFO(name);
  const Config cfg = published(name);
  check_layout(cfg, world);
  const TrainingPlan plan = make_plan(cfg, world);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  double largest = 0;
  for (const MemoryEstimate& m : plan.stage_memory) largest = std::max(largest, static_cast<double>(m.total()) / gib);
  const double params = billions(cfg);
  std::printf("%s on %d ranks: %.2fB parameters, largest stage %.1f GiB per rank of %.0f GB, %.3g FLOP/token\n", name.c_str(), world,
              params, largest, cfg.system.memory_budget_gb, model_flops_per_token(cfg));
  // The published sizes (Qwen3 8B: 8.19B with its untied head; 32B: 32.8B; 235B-A22B: 235.1B; Mistral 7B:
  // 7.24B; Mixtral 8x7B: 46.7B) within
  // 1%: the tensor table holds every published tensor and nothing else of size.
  CHECK(params == Approx(published_billions).epsilon(0.01));
  CHECK(largest * gib <= cfg.system.memory_budget_gb * 1e9);
}

}  // namespace

TEST_CASE("the published Qwen3 and Mistral inputs plan on their layouts within 80 GB a GPU", "[plan][inputs]") {
  check_plan("qwen3-8b-1node.ini", 8, 8.19);
  check_plan("qwen3-32b-4node.ini", 32, 32.8);
  check_plan("mistral-7b-1node.ini", 8, 7.24);
}

TEST_CASE("the published Mixtral and Qwen3 MoE inputs plan with expert parallelism within 80 GB a GPU", "[plan][inputs][moe]") {
  check_plan("mixtral-8x7b-4node.ini", 32, 46.7);
  check_plan("qwen3-235b-a22b-16node.ini", 128, 235.1);
}
