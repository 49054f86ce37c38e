// ParallelLayout's one text form: every key printed by to_string parses back to the same layout; bad
// items are refused naming the caller's option and its keys; the configuration's keys map to it both ways.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "config/config.hpp"
#include "config/parallel_layout.hpp"

using namespace dtrain;

TEST_CASE("every layout key survives print and parse", "[config][layout]") {
  // One key away from the defaults at a time, then all at once: a key the printer drops or the parser
  // misreads changes the layout.
  std::vector<ParallelLayout> layouts(8);
  layouts[0].tp = 8;
  layouts[1].cp = 4;
  layouts[2].pp = 16;
  layouts[3].dp = 3;
  layouts[4].ep = 2, layouts[4].dp = 2;
  layouts[5].v = 5;
  layouts[6].zero = 3;
  layouts[7] = ParallelLayout{2, 3, 4, 5, 2, 6, 2};
  for (const ParallelLayout& l : layouts) {
    const std::string text = to_string(l);
    INFO(text);
    CHECK(parse_layout(text, ParallelLayout{}, "test", "keys") == l);
    CHECK_FALSE(parse_layout(text, ParallelLayout{}, "test", "keys") == ParallelLayout{});
  }
  CHECK(to_string(layouts[7]) == "tp=2,cp=3,pp=5,dp=4,ep=2,v=6,zero=2");
  CHECK(to_string(layouts[7], ' ') == "tp=2 cp=3 pp=5 dp=4 ep=2 v=6 zero=2");
}

TEST_CASE("keys left out keep the base layout's values; the caller's own keys go to it", "[config][layout]") {
  const ParallelLayout base{2, 1, 4, 2, 1, 1, 1};
  const ParallelLayout l = parse_layout("pp=4", base, "test", "keys");
  CHECK(l.tp == 2);
  CHECK(l.dp == 4);
  CHECK(l.pp == 4);
  CHECK(l.zero == 1);
  int mb = 0;
  const ParallelLayout m = parse_layout("mb=3,tp=1", base, "test", "keys", [&](const std::string& key, const std::string& value, const std::string&) {
    if (key != "mb") return false;
    mb = std::stoi(value);
    return true;
  });
  CHECK(mb == 3);
  CHECK(m.tp == 1);
}

TEST_CASE("bad layout items are refused, naming the option and its keys", "[config][layout]") {
  for (const char* bad : {"tq=2", "tp=0", "tp=two", "tp", "dp=", "zero=4", "v=0", "ep=-1", "tp=2x", "pp=16777217", ""}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_layout(bad, ParallelLayout{}, "--reshard", "tp, pp"), UserError);
    CHECK_THROWS_WITH(parse_layout(bad, ParallelLayout{}, "--reshard", "tp, pp"), Catch::StartsWith("--reshard"));
  }
  CHECK_THROWS_WITH(parse_layout("tq=2", ParallelLayout{}, "--reshard", "tp, pp"),
                    Catch::Contains("unknown key 'tq'") && Catch::Contains("keys: tp, pp"));
}

TEST_CASE("the configuration's keys and the layout map both ways", "[config][layout]") {
  SystemConfig system;
  const ParallelLayout l{2, 2, 3, 4, 3, 2, 3};
  set_parallel_layout(system, l);
  CHECK(system.tensor_model_parallel_size == 2);
  CHECK(system.use_distributed_optimizer);
  CHECK(system.zero_stage == 3);
  CHECK(parallel_layout(system, l.world()) == l);  // dp is what the world leaves
  set_parallel_layout(system, ParallelLayout{});
  CHECK_FALSE(system.use_distributed_optimizer);
  CHECK(parallel_layout(system, 6).dp == 6);
  CHECK(parallel_layout(system, 6).zero == 0);
}
