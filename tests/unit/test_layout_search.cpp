// The planner's search against a brute force: every layout of a small model on 4 ranks planned with
// make_plan, the fastest that fits and the least memory found by trying them all.
// Tolerances: Approx() (relative 100 x float epsilon, 1.2e-5) compares double-precision formulas of a
// few dozen operations on exact inputs (each within ~1e-14 relative, whatever the CPU) with values
// written in decimal; any wrong term moves a result by far more.
#include <catch2/catch.hpp>

#include <limits>

#include "common/error.hpp"
#include "config/load.hpp"
#include "config/validate.hpp"
#include "plan/layout_search.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;

namespace {

ClusterSpec host_cluster(double memory) {
  ClusterSpec c;
  c.device = ComputeDevice::cpu;
  c.nodes = 2;
  c.devices_per_node = 2;
  c.peak_fp32 = c.peak_bf16 = 1e11;
  c.memory = memory;
  c.memory_bandwidth = 1e10;
  c.gemm_efficiency = {{1e4, 0.1}, {1e8, 0.7}};
  c.intra_node = {5e9, 1e-6};
  c.inter_node = {1e9, 3e-5};
  return c;
}

struct Brute {
  double fastest = std::numeric_limits<double>::infinity();
  double least_memory = std::numeric_limits<double>::infinity();
};

// Every (tp, pp, v, schedule, micro-batch, recomputation, optimizer) of the model on 4 ranks, through dtrain's
// own checks and make_plan; the cost of those that fit `memory`.
Brute brute_force(const Config& base, const ClusterSpec& cl) {
  Brute b;
  const int world = cl.world(), L = base.model.num_layers, gb = base.model.global_batch_size;
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2)
      for (int v = 1; v <= L; ++v)
        for (bool zero_bubble : {false, true})  // zb-h1 at v = 1, zbv at v = 2
          for (int mb = 1; mb <= gb; ++mb)
            for (auto rc : {RecomputeGranularity::none, RecomputeGranularity::selective, RecomputeGranularity::full})
              for (int zero = 0; zero <= 3; ++zero) {
                Layout l;
                l.sizes = {tp, 1, world / (tp * pp), pp};
                if (v > 1 && pp == 1) continue;
                if (zero_bubble && (pp == 1 || v > 2)) continue;
                if (zero > 0 && l.sizes.dp == 1) continue;
                l.sizes.v = v;
                l.zero_bubble = zero_bubble;
                l.micro_batch = mb;
                l.recompute = rc;
                l.sizes.zero = zero;
                l.sequence_parallel = tp > 1;
                Config c = with_layout(base, l);
                c.system.device = ComputeDevice::cpu;
                double memory = 0;
                try {
                  validate_config(c);
                  memory = static_cast<double>(make_plan(c, world).peak_memory());
                } catch (const UserError&) {
                  continue;
                }
                b.least_memory = std::min(b.least_memory, memory);
                if (memory <= cl.memory) b.fastest = std::min(b.fastest, predict_step(c, l, cl).step());
              }
  return b;
}

}  // namespace

TEST_CASE("layout search finds the fastest layout that fits, and the least memory when none does", "[plan][search]") {
  const Config cfg = load_config("[model]\nnum_layers=4\nhidden_size=64\nnum_attention_heads=4\nseq_length=32\nvocab_size=128\n"
                                 "global_batch_size=8\n", "t", {});
  const ClusterSpec roomy = host_cluster(1e9);
  const SearchResult r = search_layouts(cfg, roomy, 3);
  REQUIRE(r.best.size() == 3);
  for (std::size_t i = 0; i < r.best.size(); ++i) {
    CHECK(static_cast<double>(r.best[i].memory) <= roomy.memory);
    if (i > 0) CHECK(r.best[i - 1].cost.step() <= r.best[i].cost.step());
  }
  CHECK(r.best[0].cost.step() == Approx(brute_force(cfg, roomy).fastest));
  // tokens/s = 8 samples x 32 tokens per step.
  CHECK(r.best[0].tokens_per_s == Approx(256.0 / r.best[0].cost.step()));

  // A memory between the least any layout needs and the most: the search still finds the fastest that
  // fits; below the least, nothing fits and the search names the least.
  const Brute all = brute_force(cfg, host_cluster(1e18));
  const ClusterSpec tight = host_cluster(all.least_memory * 1.01);
  const SearchResult t = search_layouts(cfg, tight, 1);
  REQUIRE(t.best.size() == 1);
  CHECK(t.best[0].cost.step() == Approx(brute_force(cfg, tight).fastest));
  const SearchResult none = search_layouts(cfg, host_cluster(all.least_memory * 0.99), 1);
  CHECK(none.best.empty());
  REQUIRE(none.any_valid);
  CHECK(static_cast<double>(none.least_memory.memory) == all.least_memory);
}

TEST_CASE("the search splits blocks that do not divide the stages unevenly, lighter at the ends", "[plan][search][uneven]") {
  // 5 blocks on 4 ranks: pp 2 only as 3 + 2 (the last stage, which holds the LM head, the lighter);
  // pp 4 has no split with lighter ends (5 - 2f is odd), so it is not tried.
  const Config cfg = load_config("[model]\nnum_layers=5\nhidden_size=64\nnum_attention_heads=4\nseq_length=32\nvocab_size=128\n"
                                 "global_batch_size=8\n", "t", {});
  const SearchResult r = search_layouts(cfg, host_cluster(1e9), 100000);
  int pipelined = 0;
  for (const auto& b : r.best) {
    CHECK(b.layout.sizes.pp <= 2);
    if (b.layout.sizes.pp == 1) continue;
    ++pipelined;
    CHECK(b.layout.first_stage_layers == 3);
    CHECK(b.layout.last_stage_layers == 2);
  }
  CHECK(pipelined > 0);
  CHECK(r.refused.empty());  // every split tried is one dtrain accepts
}

TEST_CASE("a layout's own pipeline split is what the cost model prices", "[plan][search][uneven]") {
  // 5 blocks as 3 + 2 on pp 2: the same seconds whether the split comes with the layout or with the
  // configuration, and more than an even 2.5 blocks per stage could take (the first stage's 3 blocks).
  const Config cfg = load_config("[model]\nnum_layers=5\nhidden_size=64\nnum_attention_heads=4\nseq_length=32\nvocab_size=128\n"
                                 "global_batch_size=8\n", "t", {});
  Layout l;
  l.sizes = {1, 1, 2, 2};
  l.micro_batch = 1;
  l.first_stage_layers = 3, l.last_stage_layers = 2;
  const ClusterSpec cl = host_cluster(1e9);
  const double from_layout = predict_step(cfg, l, cl).step();
  CHECK(from_layout == predict_step(with_layout(cfg, l), l, cl).step());
  Layout two_and_three = l;
  two_and_three.first_stage_layers = 2, two_and_three.last_stage_layers = 3;
  CHECK(predict_step(cfg, two_and_three, cl).compute != predict_step(cfg, l, cl).compute);  // the head's stage matters
}
