// RankLayout against hand-written golden tables (no MPI): Megatron's 16-rank example and the 8-rank
// layout that tests/golden/layout_np8_tp2_pp2.txt also pins for the dry-run output.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "plan/rank_layout.hpp"

using namespace dtrain;
using Groups = std::vector<std::vector<int>>;

namespace {

std::string format(const Groups& groups) {
  std::string s;
  for (const auto& g : groups) {
    s += s.empty() ? "[" : " [";
    for (std::size_t i = 0; i < g.size(); ++i) s += (i ? "," : "") + std::to_string(g[i]);
    s += "]";
  }
  return s;
}

}  // namespace

TEST_CASE("16 ranks, tp=2 pp=4 dp=2, default order: groups written out by hand", "[layout]") {
  ParallelLayout s;
  s.tp = 2;
  s.pp = 4;
  s.dp = 2;
  const RankLayout layout(s, "tp-cp-dp-pp");
  REQUIRE(layout.world_size() == 16);
  CHECK(layout.groups(Axis::tp) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(layout.groups(Axis::dp) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(layout.groups(Axis::pp) == Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  CHECK(layout.groups(Axis::cp).size() == 16);
  CHECK(layout.embedding_groups() == Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}});
  // rank 11 = tp 1, dp 1, pp 2
  const Coords c = layout.coords_of(11);
  CHECK(c.tp == 1);
  CHECK(c.dp == 1);
  CHECK(c.pp == 2);
  CHECK(layout.embedding_group_of(11).empty());
  CHECK(layout.embedding_group_of(13) == std::vector<int>{1, 13});
}

TEST_CASE("8 ranks, tp=2 pp=2 dp=2 match the golden file used by the dry-run test", "[layout]") {
  ParallelLayout s;
  s.tp = 2;
  s.pp = 2;
  s.dp = 2;
  const RankLayout layout(s, "tp-cp-dp-pp");
  std::ifstream in(DTRAIN_SOURCE_DIR "/tests/golden/layout_np8_tp2_pp2.txt");
  REQUIRE(in);
  std::map<std::string, std::string> golden;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(": ");
    golden[line.substr(0, colon)] = line.substr(colon + 2);
  }
  CHECK(golden.at("TP groups") == format(layout.groups(Axis::tp)));
  CHECK(golden.at("CP groups") == format(layout.groups(Axis::cp)));
  CHECK(golden.at("DP groups") == format(layout.groups(Axis::dp)));
  CHECK(golden.at("PP groups") == format(layout.groups(Axis::pp)));
  CHECK(golden.at("embedding groups") == format(layout.embedding_groups()));
}

TEST_CASE("another order puts data parallel innermost", "[layout]") {
  ParallelLayout s;
  s.tp = 2;
  s.dp = 2;
  const RankLayout layout(s, "dp-tp-cp-pp");
  CHECK(layout.groups(Axis::dp) == Groups{{0, 1}, {2, 3}});
  CHECK(layout.groups(Axis::tp) == Groups{{0, 2}, {1, 3}});
}

TEST_CASE("coordinates round-trip and every group partitions the world", "[layout]") {
  ParallelLayout s;
  s.tp = 2;
  s.cp = 1;
  s.pp = 3;
  s.dp = 2;
  for (const char* order : {"tp-cp-dp-pp", "tp-cp-pp-dp", "pp-dp-cp-tp"}) {
    const RankLayout layout(s, order);
    for (int r = 0; r < layout.world_size(); ++r) CHECK(layout.rank_of(layout.coords_of(r)) == r);
    for (Axis a : kAllAxes) {
      std::vector<int> seen(layout.world_size(), 0);
      const auto groups = layout.groups(a);
      CHECK(static_cast<int>(groups.size()) * s[a] == layout.world_size());
      for (std::size_t gi = 0; gi < groups.size(); ++gi)
        for (int r : groups[gi]) {
          ++seen[r];
          CHECK(layout.group_index(a, r) == static_cast<int>(gi));
        }
      for (int n : seen) CHECK(n == 1);
    }
  }
}

TEST_CASE("a malformed order string is a user error naming the key", "[layout]") {
  ParallelLayout s;
  for (const char* bad : {"tp-dp-pp", "tp-tp-dp-pp", "tp-cp-dp-xx", ""}) {
    try {
      RankLayout layout(s, bad);
      FAIL("accepted order '" << bad << "'");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("system.rank_order") != std::string::npos);
    }
  }
}

TEST_CASE("16 ranks, tp=2 cp=2 dp=4 ep=2: EP and expert-data-parallel groups written out by hand", "[layout][ep]") {
  ParallelLayout s;
  s.tp = 2;
  s.cp = 2;
  s.dp = 4;
  s.ep = 2;
  const RankLayout layout(s, "tp-cp-dp-pp");  // rank = tp + 2 * (cp + 2 * dp)
  CHECK(s.edp() == 4);
  // EP groups: data-parallel ranks {0,1} and {2,3} of each (tp, cp).
  CHECK(layout.ep_groups() == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  // EDP groups: same tp and EP rank (dp % 2), over (cp, dp / 2), ordered by cp + 2 * (dp / 2).
  CHECK(layout.edp_groups() == Groups{{0, 2, 8, 10}, {1, 3, 9, 11}, {4, 6, 12, 14}, {5, 7, 13, 15}});
  const Coords c = layout.coords_of(13);  // tp 1, cp 0, dp 3
  CHECK(layout.sizes().ep_rank(c) == 1);
  CHECK(layout.sizes().edp_rank(c) == 2);
  CHECK(layout.edp_group_of(13)[2] == 13);
  CHECK(layout.ep_group_of(13)[1] == 13);
}

TEST_CASE("8 ranks, dp=8 ep=4: the example of rank_layout.hpp", "[layout][ep]") {
  ParallelLayout s;
  s.dp = 8;
  s.ep = 4;
  const RankLayout layout(s, "tp-cp-dp-pp");
  CHECK(layout.ep_groups() == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(layout.edp_groups() == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

TEST_CASE("EP and EDP groups partition the world and cross in one rank", "[layout][ep]") {
  ParallelLayout s;
  s.tp = 2;
  s.cp = 2;
  s.pp = 2;
  s.dp = 4;
  for (int ep : {1, 2, 4})
    for (const char* order : {"tp-cp-dp-pp", "tp-cp-pp-dp", "pp-dp-cp-tp"}) {
      s.ep = ep;
      const RankLayout layout(s, order);
      for (const auto& groups : {layout.ep_groups(), layout.edp_groups()}) {
        std::vector<int> seen(layout.world_size(), 0);
        for (const auto& g : groups)
          for (int r : g) ++seen[r];
        for (int n : seen) CHECK(n == 1);
      }
      for (int r = 0; r < layout.world_size(); ++r) {
        const Coords c = layout.coords_of(r);
        CHECK(layout.ep_group_of(r)[layout.sizes().ep_rank(c)] == r);
        CHECK(layout.edp_group_of(r)[layout.sizes().edp_rank(c)] == r);
        CHECK(static_cast<int>(layout.edp_group_of(r).size()) == s.edp());
        for (int other : layout.edp_group_of(r)) CHECK(layout.sizes().ep_rank(layout.coords_of(other)) == layout.sizes().ep_rank(c));
      }
    }
}
