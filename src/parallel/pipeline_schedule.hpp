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
#pragma once
#include <string>
#include <vector>

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

// Action list of `stage` for the schedule name ("afab", "1f1b", "interleaved").
StageActions schedule_actions(const std::string& schedule, int p, int m, int v, int stage);

// Chunk-forwards of the interleaved schedule's warmup on `stage` (before the first backward).
inline int interleaved_warmup(int p, int m, int v, int stage) { return (p - stage - 1) * 2 + (v - 1) * (p + m % p); }

// Largest number of (micro-batch, chunk) activations a stage's list holds at once.
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
