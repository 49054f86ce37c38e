// make_plan: micro-batching, predicted bubble, memory per stage from the rank plans, the memory check.
#include "plan/training_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "common/error.hpp"
#include "plan/layout_checks.hpp"
#include "plan/pipeline_schedule.hpp"

namespace dtrain {
namespace {

// Chunk-forwards per step and stage beyond this are refused: schedules are lists of this length.
constexpr long kMaxChunkForwards = 1 << 20;

std::string gb(double bytes) {
  char buf[48];
  if (bytes >= 1e12)
    std::snprintf(buf, sizeof buf, "%.1f TB", bytes / 1e12);
  else
    std::snprintf(buf, sizeof buf, "%.3f GB", bytes / 1e9);
  return buf;
}

TrainingPlan plan_for(const Config& c, const ParallelLayout& s, int mb) {
  TrainingPlan p;
  p.sizes = s;
  p.schedule = c.system.pipeline_schedule;
  p.micro_batch = mb;
  p.num_micro_batches = c.model.global_batch_size / (mb * s.dp);
  p.bubble = predicted_bubble(p.schedule, s.pp, p.num_micro_batches, s.v);
  return p;
}

// Fills stage_memory and largest_message from the rank plans of (tp 0, dp 0, stage) for every stage.
void plan_memory(const Config& c, TrainingPlan& p) {
  p.stage_memory.clear();
  p.largest_message = 0;
  for (int stage = 0; stage < p.sizes.pp; ++stage) {
    Coords at;
    at.pp = stage;
    const RankPlan rp = make_rank_plan(c, p, at);
    p.stage_memory.push_back(rp.memory());
    p.largest_message = std::max(p.largest_message, rp.largest_message());
  }
}

// The stage whose rank keeps the most in host memory (system.offload_optimizer, offload_params on a GPU).
int most_offloaded(const TrainingPlan& p) {
  int worst = 0;
  for (int st = 0; st < static_cast<int>(p.stage_memory.size()); ++st)
    if (p.stage_memory[st].offloaded > p.stage_memory[worst].offloaded) worst = st;
  return worst;
}

bool fits_host(const TrainingPlan& p, const MemoryLimit& limit) {
  return limit.host_bytes <= 0 || p.stage_memory.empty() ||
         static_cast<double>(p.stage_memory[most_offloaded(p)].offloaded) <= limit.host_bytes;
}

bool fits(const TrainingPlan& p, const MemoryLimit& limit) {
  return (limit.bytes <= 0 || static_cast<double>(p.peak_memory()) <= limit.bytes) && fits_host(p, limit);
}

std::string memory_problem(const TrainingPlan& p, const MemoryLimit& limit) {
  if (!fits_host(p, limit)) {
    const int st = most_offloaded(p);
    return "what is offloaded to host memory (system.offload_optimizer, system.offload_params) needs " +
           gb(static_cast<double>(p.stage_memory[st].offloaded)) + " per rank on pipeline stage " + std::to_string(st) +
           ", more than the " + gb(limit.host_bytes) + " of host memory a rank can use (" + limit.host_source +
           "); use the distributed optimizer (each rank offloads its slice), more ranks, or less offload";
  }
  int worst = 0;
  for (int st = 0; st < static_cast<int>(p.stage_memory.size()); ++st)
    if (p.stage_memory[st].total() > p.stage_memory[worst].total()) worst = st;
  const MemoryEstimate& m = p.stage_memory[worst];
  const std::string biggest = m.biggest_term();
  const double term = biggest == "params"      ? m.params
                      : biggest == "grads"     ? m.grads
                      : biggest == "optimizer" ? m.optimizer
                      : biggest == "buffers"   ? m.buffers
                                               : m.activations;
  return "the plan needs " + gb(static_cast<double>(m.total())) + " per rank on pipeline stage " + std::to_string(worst) +
         " (the biggest term: " + biggest + " " + gb(term) + "), more than the " + gb(limit.bytes) + " a rank can use (" +
         limit.source + "); use more ranks (tensor or pipeline parallelism), a smaller model.micro_batch_size, "
         "system.use_distributed_optimizer, or a smaller model";
}

}  // namespace

std::size_t TrainingPlan::peak_memory() const {
  std::size_t peak = 0;
  for (const auto& m : stage_memory) peak = std::max(peak, m.total());
  return peak;
}

TrainingPlan make_plan(const Config& c, int world, const MemoryLimit& limit) {
  check_layout(c, world);
  const ParallelLayout s = parallel_layout(c.system, world);
  const PipelineSchedule sched = c.system.pipeline_schedule;
  const int v = s.v;
  const int per_dp = c.model.global_batch_size / s.dp;
  auto schedule_ok = [&](const TrainingPlan& p) {
    return (sched != PipelineSchedule::interleaved || p.num_micro_batches >= s.pp) &&
           static_cast<long>(p.num_micro_batches) * v <= kMaxChunkForwards;
  };

  TrainingPlan plan;
  if (c.model.micro_batch_size.automatic) {
    // Largest micro-batch (a divisor of global_batch/dp) whose bubble and memory are within bounds.
    if (per_dp < 1 || c.model.global_batch_size % s.dp != 0)
      throw UserError("model.global_batch_size=" + std::to_string(c.model.global_batch_size) +
                      " is not divisible by the data-parallel size " + std::to_string(s.dp));
    bool found = false;
    for (int mb = per_dp; mb >= 1 && !found; --mb) {
      if (per_dp % mb != 0) continue;
      TrainingPlan cand = plan_for(c, s, mb);
      if (!schedule_ok(cand) || cand.bubble > c.system.max_bubble_fraction) continue;
      plan_memory(c, cand);
      if (!fits(cand, limit)) continue;
      plan = cand;
      found = true;
    }
    if (!found) {
      TrainingPlan smallest = plan_for(c, s, 1);
      if (!schedule_ok(smallest))
        throw UserError("model.micro_batch_size=auto: even micro_batch_size=1 gives " + std::to_string(smallest.num_micro_batches) +
                        " micro-batches, and the interleaved schedule needs at least pipeline_model_parallel_size=" +
                        std::to_string(s.pp) + "; raise model.global_batch_size");
      plan_memory(c, smallest);
      throw UserError("model.micro_batch_size=auto: no micro-batch meets system.max_bubble_fraction=" +
                      std::to_string(c.system.max_bubble_fraction) + (limit.bytes > 0 ? " and the memory limit (" + limit.source + ")" : std::string()) +
                      " (micro_batch=1 gives bubble " + std::to_string(smallest.bubble) + " and peak memory " +
                      gb(static_cast<double>(smallest.peak_memory())) + "); raise model.global_batch_size or the limits");
    }
  } else {
    plan = plan_for(c, s, static_cast<int>(c.model.micro_batch_size.value));
  }

  const int m = plan.num_micro_batches;
  if (sched == PipelineSchedule::interleaved && m < s.pp) {
    std::string valid;
    for (int mb = 1; mb <= per_dp; ++mb)
      if (per_dp % mb == 0 && per_dp / mb >= s.pp) valid += (valid.empty() ? "" : ", ") + std::to_string(mb);
    throw UserError("the interleaved schedule needs at least as many micro-batches as pipeline stages, but there are " +
                    std::to_string(m) + " (= global_batch_size / (micro_batch_size x dp)) for pipeline_model_parallel_size=" +
                    std::to_string(s.pp) + "; " +
                    (valid.empty() ? "raise model.global_batch_size" : "use model.micro_batch_size in {" + valid + "}"));
  }
  if (!schedule_ok(plan))
    throw UserError(std::to_string(m) + " micro-batches x " + std::to_string(v) + " model chunks per step is more than " +
                    std::to_string(kMaxChunkForwards) + " chunk-forwards; raise model.micro_batch_size");
  if (plan.stage_memory.empty()) plan_memory(c, plan);
  if (!fits(plan, limit)) throw UserError(memory_problem(plan, limit));
  plan.limit = limit;
  if (plan.largest_message > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw UserError("one collective of this plan moves " + std::to_string(plan.largest_message) +
                    " values (a block's gradients, or a micro-batch's activations), more than the 2^31-1 an MPI "
                    "message can count; use tensor parallelism, a smaller model.micro_batch_size or seq_length");
  if (s.pp > 1 && m < 4 * s.pp) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "only %d micro-batches for %d pipeline stages (fewer than 4x): predicted bubble %.1f%% of each step; "
                  "a smaller micro_batch_size or a larger global_batch_size lowers it",
                  m, s.pp, 100.0 * plan.bubble);
    plan.warnings.push_back(buf);
  }
  return plan;
}

}  // namespace dtrain
