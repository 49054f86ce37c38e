// Pipeline schedules as pure action lists: completeness, forward before backward, stage dependencies
// (a unit-time simulation that must finish without deadlock), the in-flight bound, and idle time equal
// to the bubble formula.
#include <catch2/catch.hpp>

#include <set>

#include "plan/pipeline_schedule.hpp"

using namespace dtrain;

namespace {

std::vector<StageActions> all_stages(PipelineSchedule schedule, int p, int m, int v) {
  std::vector<StageActions> s;
  for (int stage = 0; stage < p; ++stage) s.push_back(schedule_actions(schedule, p, m, v, stage));
  return s;
}

void check_schedule(PipelineSchedule schedule, int p, int m, int v) {
  INFO(to_string(schedule) << " p=" << p << " m=" << m << " v=" << v);
  const auto stages = all_stages(schedule, p, m, v);
  for (int s = 0; s < p; ++s) {
    std::set<std::pair<int, int>> forwarded, backwarded;
    for (const auto& a : stages[s]) {
      const std::pair<int, int> key{a.micro_batch, a.chunk};
      if (a.kind == PipelineAction::forward) {
        CHECK(forwarded.insert(key).second);  // once
      } else {
        CHECK(forwarded.count(key) == 1);     // forward precedes backward
        CHECK(backwarded.insert(key).second);
      }
    }
    CHECK(static_cast<int>(forwarded.size()) == m * v);
    CHECK(static_cast<int>(backwarded.size()) == m * v);
    // The schedule's bound on micro-batches held at once.
    CHECK(peak_in_flight(stages[s]) == max_in_flight(schedule, p, m, v, s));  // the plan sizes slots by it
  }
  // Dependencies across stages, with backward twice the cost of forward (as in a real step).
  const SimulationResult sim = simulate_schedule(stages, v, 2.0);
  INFO(sim.problem);
  REQUIRE(sim.ok);
  // Idle time of every stage equals the bubble formula: (p-1) slots of (forward + backward) out of
  // (v*m + p - 1) such slots (AFAB and 1F1B: v = 1).
  const double predicted = predicted_bubble(schedule, p, m, v);
  for (int s = 0; s < p; ++s) CHECK(sim.idle[s] / sim.makespan == Approx(predicted).epsilon(1e-9));
}

}  // namespace

TEST_CASE("1F1B action lists", "[schedule]") {
  for (int p : {1, 2, 4})
    for (int m : {1, 2, 3, 4, 8, 13}) check_schedule(PipelineSchedule::one_f_one_b, p, m, 1);
  // Stage 0 of 4 with m = 8: 3 warmup forwards, then alternating, then 3 cooldown backwards.
  const auto a = schedule_actions(PipelineSchedule::one_f_one_b, 4, 8, 1, 0);
  CHECK(a[0] == PipelineAction{PipelineAction::forward, 0, 0});
  CHECK(a[2] == PipelineAction{PipelineAction::forward, 2, 0});
  CHECK(a[3] == PipelineAction{PipelineAction::forward, 3, 0});
  CHECK(a[4] == PipelineAction{PipelineAction::backward, 0, 0});
  CHECK(peak_in_flight(a) == 4);
  CHECK(peak_in_flight(schedule_actions(PipelineSchedule::one_f_one_b, 4, 8, 1, 3)) == 1);
}

TEST_CASE("all-forward-all-backward action lists", "[schedule]") {
  for (int p : {1, 2, 4})
    for (int m : {1, 3, 8}) check_schedule(PipelineSchedule::afab, p, m, 1);
  CHECK(peak_in_flight(schedule_actions(PipelineSchedule::afab, 4, 8, 1, 3)) == 8);
}

TEST_CASE("interleaved 1F1B action lists", "[schedule]") {
  for (int p : {2, 3, 4})
    for (int m = p; m <= 4 * p + 1; ++m)
      for (int v : {2, 3}) check_schedule(PipelineSchedule::interleaved, p, m, v);
  // Interleaving shrinks the bubble: p=4, m=8: 1F1B 3/11, interleaved v=2: 3/19.
  CHECK(predicted_bubble(PipelineSchedule::interleaved, 4, 8, 2) < predicted_bubble(PipelineSchedule::one_f_one_b, 4, 8, 1));
}
