// zbv's order from measured times, as the zero-bubble paper schedules from profiled ones: a zbv run
// starts in the order its greedy scheduler finds at equal forward, input- and weight-gradient times;
// on one step the executor times every action's compute (the device synchronised around each), the
// ranks take the largest mean of each kind over the world (the same numbers everywhere, so every stage
// computes the same orders), and the scheduler orders the actions again for those costs. Any order
// keeps each chunk's forwards, Bs and Ws in micro-batch order, and zbv's tied head sums apart
// (RankPlan::separate_tied_head), so the values trained do not change: only the idle time does.
#pragma once
#include <vector>

#include "comm/host_comm.hpp"
#include "parallel/pipeline_executor.hpp"
#include "plan/pipeline_schedule.hpp"

namespace dtrain {

struct ScheduleTuning {
  double seconds[3] = {0, 0, 0};  // per action: forward, input gradient, weight gradient (largest mean over ranks)
  ActionCosts costs;              // the same, relative to the forward
  std::vector<StageActions> stages;  // every stage's new list
  double bubble = 0;              // the new order's, simulated at those costs
  double equal_cost_bubble = 0;   // the starting order's at those costs
  bool nccl_safe = true;          // the new order runs on NCCL's rendezvous point-to-point
};

// Collective over world: the timed step's statistics of this rank's executor to the new order of a zbv
// pipeline of p stages and m micro-batches.
ScheduleTuning tune_zbv(const PipelineStepStats& timed, HostComm world, int p, int m);

}  // namespace dtrain
