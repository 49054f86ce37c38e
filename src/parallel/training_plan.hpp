// The plan of a run, decided before the first step: parallel sizes, micro-batching, the pipeline
// bubble the schedule predicts and the per-rank memory it will need.
//
// Bubble (fraction of a step a stage sits idle), p stages, m micro-batches, v chunks per stage:
//   1F1B and all-forward-all-backward: (p-1) / (m + p - 1)
//   interleaved 1F1B:                   (p-1) / (v*m + p - 1)
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "runtime/rank_layout.hpp"

namespace dtrain {

double predicted_bubble(const std::string& schedule, int p, int m, int v);
// Largest number of micro-batches whose activations a stage holds at once under the schedule.
int max_in_flight(const std::string& schedule, int p, int m, int v, int stage);

struct MemoryEstimate {          // bytes on one rank
  std::size_t params = 0, grads = 0, optimizer = 0, activations = 0;
  std::size_t total() const { return params + grads + optimizer + activations; }
};

struct TrainingPlan {
  ParallelSizes sizes;
  int virtual_stages = 1;
  int micro_batch = 1;
  int num_micro_batches = 1;     // m: gradient-accumulation steps per optimizer step
  double bubble = 0.0;
  std::vector<MemoryEstimate> stage_memory;  // per pipeline stage (tp rank 0, dp rank 0)
  std::vector<std::string> warnings;
  std::size_t peak_memory() const;
};

// Activation floats one micro-batch of one transformer block keeps for the backward pass (per rank).
std::size_t block_activation_floats(const Config& cfg, int micro_batch, int tp);
MemoryEstimate estimate_memory(const Config& cfg, const ParallelSizes& sizes, int micro_batch, int stage);

// Resolves micro_batch_size (a number or auto) and checks the schedule's needs. Throws UserError.
TrainingPlan make_plan(const Config& cfg, int world_size);

}  // namespace dtrain
