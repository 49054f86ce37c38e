// OnDemandRegion, the unit arithmetic behind on-demand arenas (host pages, GPU chunks), against cases
// worked by hand on a region of 10 units of 100 bytes (the last one partly past the region's 950 bytes).
#include <catch2/catch.hpp>

#include "runtime/on_demand_region.hpp"

using namespace dtrain;

namespace {

using Runs = std::vector<std::pair<std::size_t, std::size_t>>;
Runs runs(const std::vector<OnDemandRegion::Run>& r) {
  Runs out;
  for (const auto& x : r) out.emplace_back(x.first, x.count);
  return out;
}
Runs spans(const std::vector<OnDemandRegion::Span>& s) {
  Runs out;
  for (const auto& x : s) out.emplace_back(x.offset, x.bytes);
  return out;
}

}  // namespace

TEST_CASE("on-demand memory: commit backs every overlapping unit once", "[runtime][on_demand]") {
  OnDemandRegion r(950, 100);
  CHECK(r.units() == 10);
  CHECK(r.backed_bytes() == 0);
  CHECK(runs(r.commit(150, 100)) == Runs{{1, 2}});  // bytes 150-249 touch units 1 and 2
  CHECK(runs(r.commit(0, 950)) == Runs{{0, 1}, {3, 7}});  // the rest, around the backed run
  CHECK(r.commit(420, 1).empty());
  CHECK(r.backed_bytes() == 1000);
  CHECK(r.commit(0, 0).empty());
}

TEST_CASE("on-demand memory: discard unbacks whole units, zeroes backed edges", "[runtime][on_demand]") {
  OnDemandRegion r(950, 100);
  r.commit(0, 950);
  // Bytes 150-549: units 2-4 wholly inside; 150-199 (unit 1) and 500-549 (unit 5) at the edges.
  auto d = r.discard(150, 400);
  CHECK(runs(d.unback) == Runs{{2, 3}});
  CHECK(spans(d.zero) == Runs{{150, 50}, {500, 50}});
  CHECK(r.backed_bytes() == 700);
  // Again, with units 2-4 no longer backed: nothing to unback; the edges are backed still.
  d = r.discard(120, 450);
  CHECK(d.unback.empty());
  CHECK(spans(d.zero) == Runs{{120, 80}, {500, 70}});
  // Inside one unit, and across the boundary of two: only zeroing, and only where backed.
  CHECK(spans(r.discard(610, 20).zero) == Runs{{610, 20}});
  // 380-619: units 4 and 5 wholly inside (4 unbacked already, 5 unbacked now); the edges 380-399 (unit 3,
  // unbacked: reads as zero already) and 600-619 (unit 6, backed: zeroed).
  d = r.discard(380, 240);
  CHECK(runs(d.unback) == Runs{{5, 1}});
  CHECK(spans(d.zero) == Runs{{600, 20}});
  CHECK(!r.backed(5));
  // The region's last unit reaches past its end: the tail of a discard to the end is an edge.
  d = r.discard(800, 150);
  CHECK(runs(d.unback) == Runs{{8, 1}});
  CHECK(spans(d.zero) == Runs{{900, 50}});
  // Committing brings back exactly the units a range needs.
  CHECK(runs(r.commit(250, 300)) == Runs{{2, 4}});
}
