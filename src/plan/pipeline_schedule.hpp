// Pipeline schedules as pure data: for each stage, the ordered list of actions (forward or backward
// of micro-batch mb through model chunk c). No communication here; the executor runs the lists.
//
//   afab         all forwards, then all backwards (the oracle; holds all m micro-batches)
//   1f1b         Megatron's: warmup of min(p-s-1, m) forwards, steady one-forward-one-backward,
//                cooldown backwards; at most p-s micro-batches in flight on stage s
//   interleaved  Megatron's interleaved 1F1B over v chunks per stage, any m >= p: chunk-forwards in
//                groups of p micro-batches per chunk (the first group also takes m % p), warmup
//                (p-s-1)*2 + (v-1)*(p + m%p)
//
// Virtual stage of (stage s, chunk c) is c*p + s: the model runs virtual stages 0 .. v*p-1 in order.
//
// Bubble (fraction of a step a stage sits idle), p stages, m micro-batches, v chunks per stage:
//   1F1B and all-forward-all-backward: (p-1) / (m + p - 1)
//   interleaved 1F1B:                   (p-1) / (v*m + p - 1)
#pragma once
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace dtrain {

struct PipelineAction {
  enum Kind { forward, backward } kind;
  int micro_batch;
  int chunk;
  bool operator==(const PipelineAction& o) const {
    return kind == o.kind && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

using StageActions = std::vector<PipelineAction>;

// Action list of `stage` (v is used by the interleaved schedule only; it needs m >= p).
StageActions schedule_actions(PipelineSchedule schedule, int p, int m, int v, int stage);

// The forward actions of a list, in order: evaluation runs them and keeps nothing for a backward.
StageActions forward_only(const StageActions& actions);

double predicted_bubble(PipelineSchedule schedule, int p, int m, int v);

// Largest number of (micro-batch, chunk) activations stage `stage` holds at once under the schedule,
// from its warmup: what peak_in_flight() of its action list is.
int max_in_flight(PipelineSchedule schedule, int p, int m, int v, int stage);
// Largest number of (micro-batch, chunk) activations an action list holds at once.
int peak_in_flight(const StageActions& actions);

// Simulates the lists of all stages with unit-time forwards and backwards (a backward costs
// `backward_cost` units) and stage dependencies; returns per stage the idle units before its last
// action completes, and the makespan. Fails (returns false) on a deadlock or a dependency violation.
struct SimulationResult {
  bool ok = false;
  std::string problem;
  double makespan = 0;
  std::vector<double> idle;  // per stage
};
SimulationResult simulate_schedule(const std::vector<StageActions>& stages, int v, double backward_cost);

}  // namespace dtrain
