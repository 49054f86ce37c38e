// Pipeline schedules as pure data: for each stage, the ordered list of actions (forward or backward
// of micro-batch mb through model chunk c). No communication here; the executor runs the lists.
//
//   afab         all forwards, then all backwards (the oracle; holds all m micro-batches)
//   1f1b         Megatron's: warmup of min(p-s-1, m) forwards, steady one-forward-one-backward,
//                cooldown backwards; at most p-s micro-batches in flight on stage s
//   interleaved  Megatron's interleaved 1F1B over v chunks per stage, any m >= p: chunk-forwards in
//                groups of p micro-batches per chunk (the first group also takes m % p), warmup
//                (p-s-1)*2 + (v-1)*(p + m%p)
//   zb-h1        zero bubble H1 (Qi et al., ICLR 2024): the backward split into B (the input gradient,
//                on the critical path) and W (the weight gradients, deferred); 1F1B's warmup, then
//                F, B and the W of the micro-batch s backwards earlier: p micro-batches in flight on
//                every stage (1F1B's peak), W filling the slots where 1F1B waits (plan/zero_bubble_schedule)
//   zbv          zero bubble V: two chunks per stage in a V (stage s holds virtual stages s and 2p-1-s,
//                so stage 0 holds the first and the last layers), split backward, the order found by
//                a greedy list scheduler under the same memory (2p chunk activations: p stages' worth)
//
// Virtual stage of (stage s, chunk c): c*p + s, except zbv (virtual_stage()). The model runs virtual
// stages 0 .. v*p-1 in order.
//
// Bubble (fraction of a step a stage sits idle), p stages, m micro-batches, v chunks per stage:
//   1F1B and all-forward-all-backward: (p-1) / (m + p - 1)
//   interleaved 1F1B:                   (p-1) / (v*m + p - 1)
//   zb-h1, zbv: simulated with F = B = W (the paper's convention): zb-h1 (p-1) / (3m + p - 1)
#pragma once
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace dtrain {

// backward is the whole backward of (micro-batch, chunk); input_grad (B) and weight_grad (W) are its two
// halves in the zero-bubble schedules: B computes the chunk's input gradient (and the norms' weight
// gradients, fused into it), W the linear layers' and the embedding's weight gradients from what B kept.
// The activations of (micro-batch, chunk) are held from its forward to its backward or W.
struct PipelineAction {
  enum Kind { forward, backward, input_grad, weight_grad } kind;
  int micro_batch;
  int chunk;
  bool operator==(const PipelineAction& o) const {
    return kind == o.kind && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

using StageActions = std::vector<PipelineAction>;

// Action list of `stage` (v is used by the interleaved schedule, which needs m >= p, and zbv, v = 2).
StageActions schedule_actions(PipelineSchedule schedule, int p, int m, int v, int stage);

// Where model chunk `chunk` of `stage` sits in the model: its virtual stage (c*p + s; zbv: s for chunk 0,
// 2p-1-s for chunk 1), and the stage and chunk of a virtual stage.
int virtual_stage(PipelineSchedule schedule, int p, int stage, int chunk);
struct StageChunk {
  int stage, chunk;
};
StageChunk stage_chunk(PipelineSchedule schedule, int p, int virtual_stage);
// Whether the schedule's backwards are split into input_grad and weight_grad actions.
bool splits_backward(PipelineSchedule schedule);

// The forward actions of a list, in order: evaluation runs them and keeps nothing for a backward.
StageActions forward_only(const StageActions& actions);

// The bubble every stage sees: the formulas above, or zb-h1's and zbv's simulation with F = B = W.
double predicted_bubble(PipelineSchedule schedule, int p, int m, int v);

// Largest number of (micro-batch, chunk) activations stage `stage` holds at once under the schedule,
// from its warmup: what peak_in_flight() of its action list is.
int max_in_flight(PipelineSchedule schedule, int p, int m, int v, int stage);
// Why one stage's list cannot run (empty when it can): every (micro-batch < m, chunk < v) must have one
// forward, then one backward, or one input_grad and after it one weight_grad. The executor refuses
// such a list before it runs (fatal: a schedule generator's bug), the simulation before it starts.
std::string stage_actions_problem(const StageActions& actions, int m, int v);

// Largest number of (micro-batch, chunk) activations an action list holds at once (from a forward to
// its backward or weight_grad).
int peak_in_flight(const StageActions& actions);

// The time of one action on one chunk; a whole backward costs input_grad + weight_grad.
struct ActionCosts {
  double forward = 1.0, input_grad = 1.0, weight_grad = 1.0;
};

// Simulates the lists of all stages (chunks placed as `schedule` places them) with these costs and the
// stage dependencies (a forward after the previous virtual stage's, B or a whole backward after the
// next virtual stage's backward and its own forward, W after its own B); returns per stage the idle
// time (waiting, and the tail after its last action until the step ends), and the makespan. Fails (ok
// false) on a deadlock, an action before the one it needs on its own stage, or an action missing or
// repeated (every (micro-batch, chunk) gets one forward and one backward or one B and one W).
struct SimulationResult {
  bool ok = false;
  std::string problem;
  double makespan = 0;
  std::vector<double> idle;  // per stage
};
SimulationResult simulate_schedule(const std::vector<StageActions>& stages, PipelineSchedule schedule, int m, int v,
                                   const ActionCosts& costs);

}  // namespace dtrain
