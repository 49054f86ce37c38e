// training.freeze in the plan, against sizes computed by hand: the tiny GPT of test_rank_plan.cpp
// (4 layers, d=8, 2 heads, F=32, T=4, V=16; tensors on 16-float boundaries, a layer's group on 16 x dp)
// with wte, wpe, block 0 and h3.fc_w frozen; ZeRO-3's kept ranges; the refusals of training.freeze,
// one message each.
#include <catch2/catch.hpp>

#include "support/user_error.hpp"

#include "config/load.hpp"
#include "plan/frozen_tensors.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;

namespace {

Config tiny(const std::vector<std::string>& overrides = {}) {
  return load_config("[model]\nnum_layers=4\nhidden_size=8\nnum_attention_heads=2\nseq_length=4\nvocab_size=16\n"
                     "global_batch_size=8\nmicro_batch_size=1\n", "tiny", overrides);
}

RankPlan one_rank(const Config& c) { return make_rank_plan(c, make_plan(c, 1), Coords{}); }

std::string freeze_error(const std::vector<std::string>& overrides, int world = 1) {
  return testing::error_of([&] { make_plan(tiny(overrides), world); });
}

}  // namespace

TEST_CASE("training.freeze's patterns", "[plan][freeze]") {
  CHECK(freeze_patterns("") == std::vector<std::string>{});
  CHECK(freeze_patterns(" wte , h0.* ,,") == std::vector<std::string>{"wte", "h0.*"});
  CHECK(frozen_by({"h*.ln1_w"}, "h12.ln1_w"));
  CHECK_FALSE(frozen_by({"h*.ln1_w"}, "h12.ln1_b"));
  CHECK_FALSE(frozen_by({"h1.*"}, "h12.ln1_w"));
}

TEST_CASE("frozen tensors lie after the trainable ones, outside the gradient arena", "[plan][freeze]") {
  const RankPlan p = one_rank(tiny({"--training.freeze=wte,wpe,h0.*,h3.fc_w"}));
  const auto at = [&](const char* name) { return p.table.get(name).offset; };
  // Trainable first, in table order. A block's 12 tensors span 920 (test_rank_plan.cpp): h1 at 0, h2 at
  // 928, h3 at 1856 without fc_w (368..624 of a block): ln1_w 1856, ..., ln2_b 2208 (+352), fc_b 2224,
  // fcproj_w 2256, fcproj_b 2512..2520; lnf_w 2528 (a new group), lnf_b 2544..2552. The gradient arena:
  // 2552 padded to 2560.
  CHECK(at("h1.ln1_w") == 0);
  CHECK(at("h2.ln1_w") == 928);
  CHECK(at("h3.ln2_b") == 2208);
  CHECK(at("h3.fc_b") == 2224);
  CHECK(at("h3.fcproj_b") == 2512);
  CHECK(at("lnf_w") == 2528);
  CHECK(p.table.trainable_total() == 2552);
  CHECK(p.grad_arena_size == 2560);
  // Then the frozen ones from 2560: wte (16,8) 2560..2688, wpe (4,8) ..2720, block 0 2720..3640, h3.fc_w
  // (32,8) at 3648 (its own group) ..3904.
  CHECK(at("wte") == 2560);
  CHECK(at("wpe") == 2688);
  CHECK(at("h0.ln1_w") == 2720);
  CHECK(at("h0.fcproj_b") == 2720 + 912);
  CHECK(at("h3.fc_w") == 3648);
  CHECK(p.table.total() == 3904);
  CHECK(p.arena_size == 3904);
  CHECK(p.has_frozen());
  CHECK_FALSE(p.table.get("h0.qkv_w").trainable);
  CHECK(p.table.get("h3.fc_b").trainable);
  // Buckets of the trainable tensors only: blocks 1, 2, 3 and the head.
  REQUIRE(p.buckets.size() == 4);
  CHECK(p.buckets[0].range.begin == 0);
  CHECK(p.buckets[2].range.begin == 1856);
  CHECK(p.buckets[2].range.end == 2528);
  CHECK(p.buckets[3].layer == kHeadLayer);
  CHECK(p.buckets[3].range.end == 2560);
  REQUIRE(p.optimizer_ranges.size() == 1);
  CHECK(p.optimizer_ranges[0].end == 2560);
  // Memory (fp32): every parameter, the gradients and the two moments of the gradient arena only.
  const MemoryEstimate m = p.memory();
  CHECK(m.params == 3904 * 4);
  CHECK(m.grads == 2560 * 4);
  CHECK(m.optimizer == 2 * 2560 * 4);
  // Checkpoints: every tensor whole (3664 elements: 160 + 4 x 872 + 16), moments of the trainable
  // ones (3 x 872 - 256 + 16 = 2376) twice.
  CHECK(p.checkpoint_elements() == 3664 + 2 * 2376);
  const auto& ts = p.table.tensors();
  for (std::size_t i = 0; i < ts.size(); ++i) {
    INFO(ts[i].name);
    CHECK(p.writes_params(i));
    CHECK(p.writes_moments(i) == ts[i].trainable);
  }
}

TEST_CASE("without frozen tensors the layout is the one without the key", "[plan][freeze]") {
  const RankPlan a = one_rank(tiny()), b = one_rank(tiny({"--training.freeze= , "}));
  REQUIRE(a.table.tensors().size() == b.table.tensors().size());
  for (std::size_t i = 0; i < a.table.tensors().size(); ++i) CHECK(a.table.tensors()[i].offset == b.table.tensors()[i].offset);
  CHECK(b.grad_arena_size == b.arena_size);
  CHECK_FALSE(b.has_frozen());
  // bf16 at dp 2: groups on 32 floats. wte 0, wpe 128, blocks 1-3 at 160, 1088, 2016 (each 920 long,
  // then aligned), lnf_w 2944..2952: 2952 padded to 2976, where the frozen tensors begin (past the last
  // bucket: on 16 floats they would begin at 2960), block 0 to 3896, lnf_b at 3904 (its own group).
  const Config c = tiny({"--training.freeze=h0.*,lnf_b", "--system.precision=bf16"});
  const RankPlan d = make_rank_plan(c, make_plan(c, 2), Coords{});
  CHECK(d.table.get("h3.ln1_w").offset == 2016);
  CHECK(d.table.trainable_total() == 2952);
  CHECK(d.grad_arena_size == 2976);
  CHECK(d.buckets.back().range.end == 2976);
  CHECK(d.table.get("h0.ln1_w").offset == 2976);
  CHECK(d.table.get("lnf_b").offset == 3904);
  CHECK(d.arena_size == 3936);
  CHECK(d.memory().optimizer == 3 * 2976 * 4);  // moments and master weights of the trainable ones
}

TEST_CASE("ZeRO-3 shards the trainable tensors and keeps the frozen ones whole", "[plan][freeze]") {
  // dp 2, fp32, every block but block 1 frozen with the embedding: the buckets are block 1's and the
  // head's; each rank keeps its half of them and the frozen tail whole, and writes that tail to
  // checkpoints whole from either replica's first rank (rank 0 here).
  const Config c = tiny({"--training.freeze=wte,wpe,h0.*,h2.*,h3.*", "--system.use_distributed_optimizer=true",
                         "--system.zero_stage=3"});
  const RankPlan p = make_rank_plan(c, make_plan(c, 2), Coords{});
  // Trainable: h1 at 0..920, lnf_w 928 (a new group on 32 floats), lnf_b 944..952; padded to 960.
  CHECK(p.grad_arena_size == 960);
  REQUIRE(p.buckets.size() == 2);
  CHECK(p.buckets[1].layer == kHeadLayer);
  const std::vector<ArenaRange> kept = p.param_ranges();
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].begin == 0);
  CHECK(kept[0].end == 464);  // half of block 1's 928
  CHECK(kept[1].begin == 928);
  CHECK(kept[1].end == 944);  // half of the head's 32
  CHECK(kept[2].begin == 960);
  CHECK(kept[2].end == p.arena_size);
  const auto& ts = p.table.tensors();
  for (std::size_t i = 0; i < ts.size(); ++i) {
    INFO(ts[i].name);
    CHECK(p.writes_params(i) == !ts[i].trainable);  // the trainable ones by their slices' owners
  }
  // The embedding's and the head's buckets apart when the blocks between them are frozen.
  const Config linear_probe = tiny({"--training.freeze=h*", "--system.use_distributed_optimizer=true", "--system.zero_stage=3"});
  const RankPlan q = make_rank_plan(linear_probe, make_plan(linear_probe, 2), Coords{});
  REQUIRE(q.buckets.size() == 2);
  CHECK(buckets_of_layer(q.buckets, kEmbeddingLayer, true) == std::vector<int>{0});
  CHECK(buckets_of_layer(q.buckets, kHeadLayer, true) == std::vector<int>{1, 0});
  CHECK(buckets_of_layer(q.buckets, kHeadLayer, false) == std::vector<int>{1});
}

TEST_CASE("frozen tensors take no part in gradient reductions", "[plan][freeze]") {
  // tp 2 with sequence parallelism: the norms' gradients are summed over tp, the frozen norms' not
  // (they have none). pp 2 with the tied embedding: wte's two copies are summed, not when it is frozen.
  const Config c = tiny({"--training.freeze=wte,wpe,h2.ln1_w,h3.*", "--system.tensor_model_parallel_size=2",
                         "--system.pipeline_model_parallel_size=2", "--system.sequence_parallel=true"});
  const TrainingPlan plan = make_plan(c, 4);
  for (int pp = 0; pp < 2; ++pp) {
    Coords at;
    at.pp = pp;
    const RankPlan p = make_rank_plan(c, plan, at);
    CHECK(p.tied_embedding == -1);
    CHECK_FALSE(p.sequence_parallel_tensors.empty());
    for (int i : p.sequence_parallel_tensors) {
      INFO(p.table.tensors()[static_cast<std::size_t>(i)].name);
      CHECK(p.table.tensors()[static_cast<std::size_t>(i)].trainable);
    }
  }
  const Config tied = tiny({"--system.pipeline_model_parallel_size=2"});
  CHECK(make_rank_plan(tied, make_plan(tied, 2), Coords{}).tied_embedding >= 0);  // the same run without freeze sums them
}

TEST_CASE("training.freeze refusals name the pattern and the way out", "[plan][freeze]") {
  using testing::contains;
  const std::string none = freeze_error({"--training.freeze=wte,nothing"});
  CHECK(contains(none, "training.freeze='wte,nothing': the pattern 'nothing' matches no tensor of this model, whose tensors are "
                       "wte, wpe, lnf_w, lnf_b and h<layer>.{ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, "
                       "fcproj_w, fcproj_b}"));
  CHECK(contains(none, "freezes one of wte and wpe: freeze both or neither"));
  CHECK(contains(freeze_error({"--training.freeze=*"}), "freezes every tensor of the model: nothing would train"));
  const std::vector<std::string> llama = {"--model.normalization=RMSNorm", "--model.position_embedding_type=rope",
                                          "--model.group_query_attention=true", "--model.num_query_groups=1"};
  std::vector<std::string> q = llama;
  q.push_back("--training.freeze=h1.q_w");
  CHECK(contains(freeze_error(q), "freezes one of h1.q_w and h1.kv_w: they are one weight"));
  CHECK(freeze_error({"--model.num_experts=2", "--training.freeze=h0.expert_fc_w,h1.router_w"}).empty());
  CHECK(freeze_error({"--training.freeze=wte,wpe,h*.ln?_b"}).empty());
}
