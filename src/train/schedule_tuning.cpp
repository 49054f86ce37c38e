// tune_zbv: measured means agreed by a max over the world, the greedy scheduler at those costs, and
// the simulation of both orders at them.
#include "train/schedule_tuning.hpp"

#include <algorithm>
#include <cmath>

#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "plan/p2p_traffic.hpp"
#include "plan/zero_bubble_schedule.hpp"

namespace dtrain {
namespace {

double worst_idle(const std::vector<StageActions>& stages, int m, const ActionCosts& costs) {
  const SimulationResult r = simulate_schedule(stages, PipelineSchedule::zbv, m, 2, costs);
  if (!r.ok) fatal("internal error: a zbv order does not run: " + r.problem);
  return *std::max_element(r.idle.begin(), r.idle.end()) / r.makespan;
}

}  // namespace

ScheduleTuning tune_zbv(const PipelineStepStats& timed, HostComm world, int p, int m) {
  ScheduleTuning t;
  for (int k = 0; k < 3; ++k) {
    const double mine = timed.count[k] > 0 ? timed.seconds[k] / timed.count[k] : 0.0;
    t.seconds[k] = all_reduce(world, mine, HostOp::max);
  }
  // Relative to the forward, to two decimals: the scheduler's ties fall the same way on every rank.
  const double f = t.seconds[0] > 0 ? t.seconds[0] : 1.0;
  const auto relative = [&](double s) { return std::max(0.01, std::round(100.0 * s / f) / 100.0); };
  t.costs = {1.0, relative(t.seconds[1]), relative(t.seconds[2])};
  t.stages = zbv_actions(p, m, t.costs);
  t.bubble = worst_idle(t.stages, m, t.costs);
  t.equal_cost_bubble = worst_idle(zbv_actions(p, m), m, t.costs);
  t.nccl_safe = nccl_pipeline_safe(t.stages, PipelineSchedule::zbv, 2);
  return t;
}

}  // namespace dtrain
