// Uneven pipeline splits: the blocks of each stage and chunk against counts written by hand, the
// errors that name the keys, and the plan of Llama 3 405B on its published layout (126 blocks, pp 16).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "support/user_error.hpp"

#include "config/load.hpp"
#include "plan/layout_checks.hpp"
#include "plan/pipeline_split.hpp"
#include "plan/rank_plan.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;
using testing::contains;
using testing::error_of;

namespace {

PipelineSplit split(int layers, int pp, int v, int first, int last, bool embedding = false, bool loss = false) {
  PipelineSplit p;
  p.num_layers = layers, p.pp = pp, p.v = v, p.first = first, p.last = last;
  p.embedding_as_layer = embedding, p.loss_as_layer = loss;
  return p;
}

std::vector<int> stage_blocks(const PipelineSplit& p) {
  std::vector<int> out;
  for (int s = 0; s < p.pp; ++s) out.push_back(p.stage_blocks(s));
  return out;
}

}  // namespace

TEST_CASE("uneven splits give each stage and chunk the blocks written by hand", "[plan][uneven]") {
  SECTION("Llama 3 405B: 126 blocks, pp 16, 7 on the first and the last stage, 8 on the others") {
    const PipelineSplit p = split(126, 16, 1, 7, 7);
    CHECK(p.errors().empty());
    CHECK(stage_blocks(p) == std::vector<int>{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7});
    CHECK(p.chunk_begin(1, 0) == 7);
    CHECK(p.chunk_begin(15, 0) == 119);
    CHECK(p.describe() == "7, 8 x 14, 7");
  }
  SECTION("interleaved: 12 blocks, pp 4, v 2, ends of 2: chunks of 1, 2, 2, 1 in round order") {
    const PipelineSplit p = split(12, 4, 2, 2, 2);
    CHECK(p.errors().empty());
    CHECK(stage_blocks(p) == std::vector<int>{2, 4, 4, 2});
    // Round 0: s0 [0], s1 [1, 2], s2 [3, 4], s3 [5]; round 1: s0 [6], s1 [7, 8], s2 [9, 10], s3 [11].
    CHECK(p.chunk_begin(0, 0) == 0);
    CHECK(p.chunk_begin(2, 0) == 3);
    CHECK(p.chunk_begin(3, 0) == 5);
    CHECK(p.chunk_begin(0, 1) == 6);
    CHECK(p.chunk_begin(1, 1) == 7);
    CHECK(p.chunk_begin(3, 1) == 11);
    const StagePart part = stage_part(p, 1);
    CHECK(part.chunks == std::vector<std::vector<int>>{{1, 2}, {7, 8}});
    CHECK(p.min_chunk_blocks() == 1);
  }
  SECTION("only the first stage given: the others share the rest") { CHECK(stage_blocks(split(10, 3, 1, 2, 0)) == std::vector<int>{2, 4, 4}); }
  SECTION("the embedding counted as a block: 8 + 1 over 3 stages") {
    const PipelineSplit p = split(8, 3, 1, 0, 0, true);
    CHECK(p.errors().empty());
    CHECK(stage_blocks(p) == std::vector<int>{2, 3, 3});
    CHECK(p.describe() == "2, 3 x 2");
  }
  SECTION("the embedding and the loss: 8 + 2 over 2 stages") { CHECK(stage_blocks(split(8, 2, 1, 0, 0, true, true)) == std::vector<int>{4, 4}); }
  SECTION("even: 8 blocks over pp 2 x v 2") {
    const PipelineSplit p = split(8, 2, 2, 0, 0);
    CHECK(stage_part(p, 1).chunks == std::vector<std::vector<int>>{{2, 3}, {6, 7}});
  }
}

TEST_CASE("a split that cannot be names its keys", "[plan][uneven]") {
  const auto first = [](const PipelineSplit& p) { return p.errors().empty() ? std::string() : p.errors().front(); };
  CHECK(contains(first(split(126, 16, 1, 0, 0)), "model.num_layers=126 is not divisible by system.pipeline_model_parallel_size=16"));
  CHECK(contains(first(split(126, 16, 1, 0, 0)), "set system.pipeline_first_stage_layers / pipeline_last_stage_layers"));
  CHECK(contains(first(split(126, 16, 1, 6, 6)), "leave 114 of model.num_layers=126 blocks, not divisible by the 14 other stages"));
  CHECK(contains(first(split(12, 4, 2, 1, 1)), "stage 0 holds 1 blocks, not divisible by its 2 model chunks"));
  CHECK(contains(first(split(10, 2, 1, 3, 3)), "with pp=2 both must add up to num_layers"));
  CHECK(contains(first(split(8, 1, 1, 3, 0)), "needs system.pipeline_model_parallel_size > 1"));
  CHECK(contains(first(split(8, 2, 1, 3, 0, true)), "two ways to split the stages unevenly; use one"));
  CHECK(contains(first(split(8, 2, 2, 0, 0, true, true)), "work without interleaving only"));
  CHECK(contains(first(split(8, 3, 1, 0, 0, true, true)), "= 10 is not divisible by system.pipeline_model_parallel_size=3"));
}

TEST_CASE("Llama 3 405B plans on its published layout with uneven ends", "[plan][uneven]") {
  std::ifstream in(std::string(DTRAIN_SOURCE_DIR) + "/inputs/llama3-405b.ini");
  std::stringstream text;
  text << in.rdbuf();
  const Config cfg = load_config(text.str(), "llama3-405b.ini", {});
  check_layout(cfg, 128);
  const TrainingPlan plan = make_plan(cfg, 128);
  REQUIRE(plan.stage_memory.size() == 16);
  Coords first, middle;
  middle.pp = 8;
  const RankPlan a = make_rank_plan(cfg, plan, first), b = make_rank_plan(cfg, plan, middle);
  CHECK(a.part.layers().size() == 7);
  CHECK(a.part.embedding);
  CHECK(b.part.layers() == std::vector<int>{63, 64, 65, 66, 67, 68, 69, 70});  // 7 + 7 x 8 blocks before stage 8
  CHECK(b.activations.blocks_per_slot == 8);
  // The even split of the same model is refused naming the keys that fix it.
  CHECK(contains(error_of([&] { check_layout(load_config(text.str(), "llama3-405b.ini", {"--system.pipeline_first_stage_layers=0",
                                                                                             "--system.pipeline_last_stage_layers=0"}),
                                             128); }),
                 "pipeline_first_stage_layers"));
}
