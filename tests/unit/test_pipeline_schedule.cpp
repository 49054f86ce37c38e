// Pipeline schedules as pure action lists: completeness, forward before backward, stage dependencies
// (a unit-time simulation that must finish without deadlock), the in-flight bound, and idle time equal
// to the bubble formula.
// Tolerance: the simulation adds unit and double costs (small integers, exact in double), so idle
// time over makespan equals the bubble formula to the rounding of one division: epsilon 1e-9.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "plan/p2p_traffic.hpp"
#include "plan/pipeline_schedule.hpp"
#include "plan/zero_bubble_schedule.hpp"

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
  const bool split = splits_backward(schedule);
  for (int s = 0; s < p; ++s) {
    CHECK(stage_actions_problem(stages[s], m, v).empty());
    std::set<std::pair<int, int>> forwarded, backwarded, weighted;
    std::vector<int> last_w(static_cast<std::size_t>(v), -1);
    for (const auto& a : stages[s]) {
      const std::pair<int, int> key{a.micro_batch, a.chunk};
      CHECK((a.kind == PipelineAction::forward || (a.kind == PipelineAction::backward) != split));
      if (a.kind == PipelineAction::forward) {
        CHECK(forwarded.insert(key).second);  // once
      } else if (a.kind == PipelineAction::weight_grad) {
        CHECK(backwarded.count(key) == 1);    // B precedes W
        CHECK(weighted.insert(key).second);
        // Each chunk's Ws in micro-batch order: every weight gradient sums its micro-batches as 1F1B does.
        CHECK(a.micro_batch > last_w[static_cast<std::size_t>(a.chunk)]);
        last_w[static_cast<std::size_t>(a.chunk)] = a.micro_batch;
      } else {
        CHECK(forwarded.count(key) == 1);     // forward precedes backward
        CHECK(backwarded.insert(key).second);
      }
    }
    CHECK(static_cast<int>(forwarded.size()) == m * v);
    CHECK(static_cast<int>(backwarded.size()) == m * v);
    CHECK(static_cast<int>(weighted.size()) == (split ? m * v : 0));
    // The schedule's bound on micro-batches held at once.
    CHECK(peak_in_flight(stages[s]) == max_in_flight(schedule, p, m, v, s));  // the plan sizes slots by it
  }
  // Dependencies across stages, with backward twice the cost of forward (as in a real step: B and W
  // one each).
  const SimulationResult sim = simulate_schedule(stages, schedule, m, v, ActionCosts{});
  INFO(sim.problem);
  REQUIRE(sim.ok);
  if (split) return;  // their bubble: the tests below
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
    const auto ops = stage_p2p_ops(schedule_actions(schedule, p, m, v, s), schedule, p, v, s);
    if (grouped) {
      out.push_back(nccl_groups(ops));
    } else {
      out.emplace_back();
      for (const auto& op : ops) out.back().push_back(std::vector<P2pOp>{op});  // every op alone, in issue order
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

// Zero bubble H1 (Qi et al., ICLR 2024, section 3.1 and Table 2 with T_F = T_B = T_W): 1F1B's bubble
// is (p-1)(T_F + T_B + T_W) per stage, ZB-H1's (p-1)(T_F + T_B - T_W), a third, at the same peak
// memory (p micro-batches). With unit costs a step is 3m units of work per stage: the bubble is
// (p-1)/(3m+p-1) on every stage, exactly (small integers in double).
TEST_CASE("zero-bubble H1 action lists", "[schedule][zero-bubble]") {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, p, 2 * p, 4 * p + 1}) {
      check_schedule(PipelineSchedule::zb_h1, p, m, 1);
      INFO("p=" << p << " m=" << m);
      const auto stages = all_stages(PipelineSchedule::zb_h1, p, m, 1);
      const SimulationResult sim = simulate_schedule(stages, PipelineSchedule::zb_h1, m, 1, ActionCosts{});
      const double bubble = predicted_bubble(PipelineSchedule::zb_h1, p, m, 1);
      if (m >= p) {  // a full pipeline: the paper's formula
        for (int s = 0; s < p; ++s) CHECK(sim.idle[s] / sim.makespan == Approx((p - 1.0) / (3.0 * m + p - 1)).epsilon(1e-9));
        CHECK(bubble == Approx(p == 1 ? 0.0 : (p - 1.0) / (3.0 * m + p - 1)).epsilon(1e-9));
      }
      CHECK(bubble <= predicted_bubble(PipelineSchedule::one_f_one_b, p, m, 1));
      for (int s = 0; s < p; ++s) CHECK(peak_in_flight(stages[s]) == std::min(m, p));  // 1F1B's stage 0, on every stage
    }
  // Stage 1 of 4, m = 8: two warmup forwards, then F B (W one micro-batch behind), the last W at the end.
  const auto a = schedule_actions(PipelineSchedule::zb_h1, 4, 8, 1, 1);
  using K = PipelineAction;
  const StageActions head{{K::forward, 0, 0}, {K::forward, 1, 0}, {K::forward, 2, 0}, {K::input_grad, 0, 0},
                          {K::forward, 3, 0}, {K::input_grad, 1, 0}, {K::weight_grad, 0, 0}};
  CHECK(StageActions(a.begin(), a.begin() + 7) == head);
  CHECK(a.back() == K{K::weight_grad, 7, 0});
}

// Zero bubble V: stage s holds virtual stages s and 2p-1-s; p stages' worth of activations (2p
// chunk activations); the simulated bubble beside 1F1B's and the paper's (Table 4 reports ZB-V's
// bubble near zero at 1F1B's memory: with equal F, B and W its schedule has a bubble of (p-1) units
// of one chunk's F against 6m units of work).
TEST_CASE("zero-bubble V action lists", "[schedule][zero-bubble]") {
  CHECK(virtual_stage(PipelineSchedule::zbv, 4, 0, 0) == 0);
  CHECK(virtual_stage(PipelineSchedule::zbv, 4, 0, 1) == 7);
  CHECK(virtual_stage(PipelineSchedule::zbv, 4, 3, 1) == 4);
  for (int vs = 0; vs < 8; ++vs) {
    const StageChunk at = stage_chunk(PipelineSchedule::zbv, 4, vs);
    CHECK(virtual_stage(PipelineSchedule::zbv, 4, at.stage, at.chunk) == vs);
  }
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, p, 2 * p, 4 * p + 1}) {
      check_schedule(PipelineSchedule::zbv, p, m, 2);
      INFO("p=" << p << " m=" << m);
      for (int s = 0; s < p; ++s) CHECK(max_in_flight(PipelineSchedule::zbv, p, m, 2, s) <= 2 * p);
      if (m >= 2 * p && p > 1) {
        const double zbv = predicted_bubble(PipelineSchedule::zbv, p, m, 2);
        CHECK(zbv <= predicted_bubble(PipelineSchedule::one_f_one_b, p, m, 1) / 3);
        CHECK(zbv <= predicted_bubble(PipelineSchedule::zb_h1, p, m, 1));
      }
    }
}

// zbv ordered for measured costs (the trainer re-plans from its second step's times): the lists stay
// valid (every action once, each chunk's Ws in micro-batch order, at most 2p chunk activations, the
// simulation runs), and at those costs they idle no more than the order for equal costs. The costs
// here are this machine's per chunk (forward 5.9 ms, input gradient 6.6, weight gradient 4.5: 1 : 1.12
// : 0.76); at p = 2, m = 8 the re-planned order is faster at them than the equal-cost one and 1F1B.
TEST_CASE("zbv ordered for measured costs", "[schedule][zero-bubble]") {
  const ActionCosts measured{1.0, 1.12, 0.76};
  // Also Bs far dearer than Ws, where a scheduler filling every slot with first-chunk forwards gets stuck.
  for (const ActionCosts& costs : {measured, ActionCosts{1.0, 2.0, 0.01}, ActionCosts{1.0, 3.0, 0.3}})
    for (int p : {2, 3, 4, 8})
      for (int m : {p, 2 * p, 4 * p, 4 * p + 3}) {
        INFO("p=" << p << " m=" << m << " costs 1 : " << costs.input_grad << " : " << costs.weight_grad);
        const auto tuned = zbv_actions(p, m, costs), equal = zbv_actions(p, m);
        for (int s = 0; s < p; ++s) {
          CHECK(stage_actions_problem(tuned[s], m, 2).empty());
          CHECK(peak_in_flight(tuned[s]) <= max_in_flight(PipelineSchedule::zbv, p, m, 2, s));
          std::vector<int> last_w(2, -1);
          for (const auto& a : tuned[s])
            if (a.kind == PipelineAction::weight_grad) {
              CHECK(a.micro_batch > last_w[static_cast<std::size_t>(a.chunk)]);
              last_w[static_cast<std::size_t>(a.chunk)] = a.micro_batch;
            }
        }
        const SimulationResult t = simulate_schedule(tuned, PipelineSchedule::zbv, m, 2, costs);
        const SimulationResult e = simulate_schedule(equal, PipelineSchedule::zbv, m, 2, costs);
        REQUIRE(t.ok);
        REQUIRE(e.ok);
        CHECK(t.makespan <= e.makespan + 1e-9);
      }
  // 1F1B at the same costs (a stage's whole forward is two chunks' worth).
  std::vector<StageActions> one;
  for (int s = 0; s < 2; ++s) one.push_back(schedule_actions(PipelineSchedule::one_f_one_b, 2, 8, 1, s));
  const ActionCosts stage_costs{2 * measured.forward, 2 * measured.input_grad, 2 * measured.weight_grad};
  const double one_f_one_b = simulate_schedule(one, PipelineSchedule::one_f_one_b, 8, 1, stage_costs).makespan;
  const double equal = simulate_schedule(zbv_actions(2, 8), PipelineSchedule::zbv, 8, 2, measured).makespan;
  const double tuned = simulate_schedule(zbv_actions(2, 8, measured), PipelineSchedule::zbv, 8, 2, measured).makespan;
  INFO("1F1B " << one_f_one_b << ", zbv for equal costs " << equal << ", re-planned " << tuned);
  CHECK(tuned < equal);
  CHECK(tuned < one_f_one_b);
}

// The simulator and the executor's check refuse a broken list: a W dropped or run twice, a B before
// its F, a W before its B.
TEST_CASE("the schedule simulation fails broken zero-bubble lists", "[schedule][zero-bubble]") {
  for (auto schedule : {PipelineSchedule::zb_h1, PipelineSchedule::zbv}) {
    const int p = 3, m = 6, v = schedule == PipelineSchedule::zbv ? 2 : 1;
    const auto good = all_stages(schedule, p, m, v);
    REQUIRE(simulate_schedule(good, schedule, m, v, ActionCosts{}).ok);
    auto index_of = [&](const StageActions& a, PipelineAction::Kind k) {
      return static_cast<std::size_t>(std::find_if(a.begin(), a.end(), [&](const PipelineAction& x) { return x.kind == k; }) - a.begin());
    };
    auto dropped = good;
    dropped[1].erase(dropped[1].begin() + static_cast<long>(index_of(dropped[1], PipelineAction::weight_grad)));
    auto twice = good;
    twice[1].push_back(twice[1][index_of(twice[1], PipelineAction::weight_grad)]);
    auto early_b = good;  // the first B moved to the front of stage 2's list
    const std::size_t b = index_of(early_b[2], PipelineAction::input_grad);
    std::rotate(early_b[2].begin(), early_b[2].begin() + static_cast<long>(b), early_b[2].begin() + static_cast<long>(b) + 1);
    auto early_w = good;  // the first W swapped with the B before it
    const std::size_t w = index_of(early_w[0], PipelineAction::weight_grad);
    std::size_t bw = w;
    while (early_w[0][bw].kind != PipelineAction::input_grad) --bw;
    std::swap(early_w[0][bw], early_w[0][w]);
    for (const auto* broken : {&dropped, &twice, &early_b, &early_w}) {
      const SimulationResult r = simulate_schedule(*broken, schedule, m, v, ActionCosts{});
      INFO(to_string(schedule) << ": " << r.problem);
      CHECK_FALSE(r.ok);
      // The executor's check (it refuses the list before running it).
      bool refused = false;
      for (const StageActions& stage : *broken) refused = refused || !stage_actions_problem(stage, m, v).empty();
      CHECK(refused);
    }
  }
}

// The zero-bubble lists on NCCL's rendezvous point-to-point: whether nccl_pipeline_safe lets NCCL
// carry them is what the simulation says; pinned here so that a change shows.
TEST_CASE("zero-bubble schedules on rendezvous point-to-point", "[schedule][zero-bubble][nccl]") {
  for (int p : {2, 3, 4})
    for (int m : {p, 2 * p, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      CHECK(nccl_pipeline_safe(PipelineSchedule::zb_h1, p, m, 1));
      // zbv's turn of the V is in memory: stage p-1 sends no activation to itself.
      for (int s = 0; s < p; ++s)
        for (const P2pOp& op : stage_p2p_ops(schedule_actions(PipelineSchedule::zbv, p, m, 2, s), PipelineSchedule::zbv, p, 2, s))
          CHECK(op.peer != s);
    }
}
