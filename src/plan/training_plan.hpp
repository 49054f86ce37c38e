// The plan of a run, decided before the first step: parallel sizes, micro-batching, the pipeline
// bubble the schedule predicts and the memory every pipeline stage's ranks will need (from their rank
// plans), checked against the memory a rank may use. Pure: the job size and the memory limit are
// arguments.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/rank_layout.hpp"
#include "plan/rank_plan.hpp"

namespace dtrain {

// The memory one rank may use: system.memory_budget_gb when set, else what the caller measured
// (the node's memory shared by its ranks). bytes <= 0: no limit.
struct MemoryLimit {
  double bytes = 0.0;
  std::string source;  // how it was found, for messages ("system.memory_budget_gb=4", "23.4 GB on node x / 4 ranks")
  // GPU runs: the host memory a rank may use for what it keeps there (the offloaded optimizer); 0 = not checked.
  double host_bytes = 0.0;
  std::string host_source;
};

struct TrainingPlan {
  ParallelLayout sizes;  // v: model chunks per stage; zero: the ZeRO stage (0 without the distributed optimizer)
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int micro_batch = 1;
  int num_micro_batches = 1;     // m: gradient-accumulation steps per optimizer step
  double bubble = 0.0;
  std::vector<MemoryEstimate> stage_memory;  // per pipeline stage, at tp rank 0 and dp rank 0 (the largest)
  std::size_t largest_message = 0;           // elements; RankPlan::largest_message over the stages
  MemoryLimit limit;                         // what one rank may use, as planned with
  std::vector<std::string> warnings;
  std::size_t peak_memory() const;
};

// Checks the layout (check_layout), resolves micro_batch_size (a number or auto: the largest whose
// bubble is within system.max_bubble_fraction and whose memory fits), checks the schedule's needs and
// that every stage fits `limit`. Throws UserError.
TrainingPlan make_plan(const Config& cfg, int world_size, const MemoryLimit& limit = {});

}  // namespace dtrain
