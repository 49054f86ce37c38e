// Pipeline schedules as pure action lists: completeness, forward before backward, stage dependencies
// (a unit-time simulation that must finish without deadlock), the in-flight bound, and idle time equal
// to the bubble formula.
// Tolerance: the simulation adds unit and double costs (small integers, exact in double), so idle
// time over makespan equals the bubble formula to the rounding of one division: epsilon 1e-9.
#include <catch2/catch.hpp>

#include <set>

#include "plan/p2p_traffic.hpp"
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

namespace {

std::vector<std::vector<std::vector<P2pOp>>> groups_of(PipelineSchedule schedule, int p, int m, int v, bool grouped) {
  std::vector<std::vector<std::vector<P2pOp>>> out;
  for (int s = 0; s < p; ++s) {
    const auto ops = stage_p2p_ops(schedule_actions(schedule, p, m, v, s), p, v, s);
    if (grouped) {
      out.push_back(nccl_groups(ops));
    } else {
      out.emplace_back();
      for (const auto& op : ops) out.back().push_back({op});  // every op alone, in issue order
    }
  }
  return out;
}

}  // namespace

// NCCL has no eager buffer and no tags: a send completes only with its receive, and messages between
// two ranks are matched in the order they were issued. Grouping a send with the receive that follows
// it, when one does, and launching every other send alone (the NCCL backend's rule) must run every
// schedule to the end with every message landing in the receive that expects it; 1F1B and AFAB do. Interleaved 1F1B with m >= 2p
// micro-batches does not (a gradient and an activation cross on a pair of stages, or groups wait on
// each other), so nccl_pipeline_safe sends its messages through MPI; the golden rule below pins which
// schedules NCCL carries. Without grouping 1F1B deadlocks at once (stage 0 sends its second activation
// while stage 1 sends its first gradient), which shows the simulation can fail.
TEST_CASE("1F1B and AFAB run on rendezvous point-to-point with the NCCL backend's groups", "[schedule][nccl]") {
  for (int p : {2, 3, 4, 8})
    for (int m : {p, p + 1, 2 * p + 1, 4 * p, 8 * p + 3})
      for (auto schedule : {PipelineSchedule::afab, PipelineSchedule::one_f_one_b}) {
        const auto r = simulate_rendezvous(groups_of(schedule, p, m, 1, true));
        INFO(to_string(schedule) << " p=" << p << " m=" << m << ": " << r.problem);
        CHECK(r.ok);
        CHECK(nccl_pipeline_safe(schedule, p, m, 1));
      }
  for (int p : {2, 3, 4})
    for (int m = p; m <= 4 * p; ++m)
      for (int v : {2, 3}) {
        INFO("interleaved p=" << p << " m=" << m << " v=" << v);
        CHECK(nccl_pipeline_safe(PipelineSchedule::interleaved, p, m, v) == (m < 2 * p));
      }
  const auto alone = simulate_rendezvous(groups_of(PipelineSchedule::one_f_one_b, 2, 4, 1, false));
  CHECK_FALSE(alone.ok);
  CHECK(alone.problem.find("deadlock") != std::string::npos);
}
