// make_plan: micro-batching, predicted bubble and memory per stage, micro_batch_size=auto.
#include "parallel/training_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.hpp"
#include "model/tensor_table.hpp"
#include "parallel/pipeline_schedule.hpp"

namespace dtrain {

double predicted_bubble(const std::string& schedule, int p, int m, int v) {
  if (p <= 1) return 0.0;
  const int chunks = schedule == "interleaved" ? v : 1;
  return static_cast<double>(p - 1) / (static_cast<double>(chunks) * m + p - 1);
}

int max_in_flight(const std::string& schedule, int p, int m, int v, int stage) {
  if (schedule == "afab") return m;
  if (schedule == "interleaved") return std::min(m * v, interleaved_warmup(p, m, v, stage) + 1);
  return std::min(m, p - stage);
}

std::size_t block_activation_floats(const Config& c, int mb, int tp) {
  const std::size_t N = static_cast<std::size_t>(mb) * c.model.seq_length;
  const std::size_t C = c.model.hidden_size, F = c.ffn_hidden(), T = c.model.seq_length;
  const std::size_t NH = c.model.num_attention_heads / tp;
  // ln1 out + mean/rstd, qkv, attention out, probabilities, proj out, residual, ln2 + stats, fc, gelu, fcproj
  return N * (C + 2) + N * 3 * C / tp + N * C / tp + static_cast<std::size_t>(mb) * NH * T * T + N * C + N * C +
         N * (C + 2) + N * F / tp * 2 + N * C;
}

MemoryEstimate estimate_memory(const Config& c, const ParallelSizes& s, int mb, int stage) {
  const int v = c.system.virtual_pipeline_model_parallel_size;
  const TensorTable table(ModelShape::from(c.model, c.ffn_hidden()), stage_part(c.model.num_layers, s.pp, v, stage), s.tp, 0);
  MemoryEstimate e;
  const std::size_t P = table.total();
  e.params = P * sizeof(float);
  e.grads = P * sizeof(float);
  e.optimizer = 2 * P * sizeof(float);  // AdamW first and second moments
  if (c.system.use_distributed_optimizer) e.optimizer = (e.optimizer + s.dp - 1) / s.dp;
  const int m = c.model.global_batch_size / (mb * s.dp);
  const std::size_t layers = c.model.num_layers / (s.pp * v);
  const std::size_t per_mb = layers * block_activation_floats(c, mb, s.tp);
  const std::size_t N = static_cast<std::size_t>(mb) * c.model.seq_length;
  std::size_t acts = per_mb * max_in_flight(c.system.pipeline_schedule, s.pp, m, v, stage) / (c.system.pipeline_schedule == "interleaved" ? v : 1);
  if (stage == s.pp - 1) acts += N * (c.model.vocab_size / s.tp) + N * (c.model.hidden_size + 2);  // logits + final norm
  if (stage == 0) acts += N * c.model.hidden_size;                                            // embedding output
  e.activations = acts * sizeof(float);
  return e;
}

std::size_t TrainingPlan::peak_memory() const {
  std::size_t peak = 0;
  for (const auto& m : stage_memory) peak = std::max(peak, m.total());
  return peak;
}

namespace {

TrainingPlan plan_for(const Config& c, const ParallelSizes& s, int mb) {
  TrainingPlan p;
  p.sizes = s;
  p.virtual_stages = c.system.virtual_pipeline_model_parallel_size;
  p.micro_batch = mb;
  p.num_micro_batches = c.model.global_batch_size / (mb * s.dp);
  p.bubble = predicted_bubble(c.system.pipeline_schedule, s.pp, p.num_micro_batches, p.virtual_stages);
  for (int stage = 0; stage < s.pp; ++stage) p.stage_memory.push_back(estimate_memory(c, s, mb, stage));
  return p;
}

std::string gb(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

TrainingPlan make_plan(const Config& c, int world) {
  ParallelSizes s;
  s.tp = c.system.tensor_model_parallel_size;
  s.pp = c.system.pipeline_model_parallel_size;
  s.cp = c.system.context_parallel_size;
  s.dp = world / (s.tp * s.cp * s.pp);
  const std::string& sched = c.system.pipeline_schedule;

  TrainingPlan plan;
  if (c.model.micro_batch_size == "auto") {
    // Largest micro-batch (a divisor of global_batch/dp) whose bubble and memory are within bounds.
    const int per_dp = c.model.global_batch_size / s.dp;
    if (per_dp < 1 || c.model.global_batch_size % s.dp != 0)
      throw UserError("model.global_batch_size=" + std::to_string(c.model.global_batch_size) +
                      " is not divisible by the data-parallel size " + std::to_string(s.dp));
    const double budget = c.system.memory_budget_gb * 1e9;
    bool found = false;
    for (int mb = per_dp; mb >= 1; --mb) {
      if (per_dp % mb != 0) continue;
      TrainingPlan cand = plan_for(c, s, mb);
      if (sched == "interleaved" && cand.num_micro_batches < s.pp) continue;
      if (cand.bubble > c.system.max_bubble_fraction) continue;
      if (budget > 0 && static_cast<double>(cand.peak_memory()) > budget) continue;
      plan = cand;
      found = true;
      break;
    }
    if (!found) {
      const TrainingPlan smallest = plan_for(c, s, 1);
      throw UserError("model.micro_batch_size=auto: no micro-batch meets system.max_bubble_fraction=" +
                      std::to_string(c.system.max_bubble_fraction) +
                      (budget > 0 ? " and system.memory_budget_gb=" + std::to_string(c.system.memory_budget_gb) : std::string()) +
                      " (micro_batch=1 gives bubble " + std::to_string(smallest.bubble) + " and peak memory " +
                      gb(smallest.peak_memory()) + "); raise model.global_batch_size or the limits");
    }
  } else {
    plan = plan_for(c, s, std::stoi(c.model.micro_batch_size));
  }

  const int m = plan.num_micro_batches;
  if (sched == "interleaved" && m < s.pp) {
    std::string valid;
    const int per_dp = c.model.global_batch_size / s.dp;
    for (int mb = 1; mb <= per_dp; ++mb)
      if (per_dp % mb == 0 && per_dp / mb >= s.pp) valid += (valid.empty() ? "" : ", ") + std::to_string(mb);
    throw UserError("the interleaved schedule needs at least as many micro-batches as pipeline stages, but there are " +
                    std::to_string(m) + " (= global_batch_size / (micro_batch_size x dp)) for pipeline_model_parallel_size=" +
                    std::to_string(s.pp) + "; " +
                    (valid.empty() ? "raise model.global_batch_size" : "use model.micro_batch_size in {" + valid + "}"));
  }
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
