// Schedule generators and a discrete-time simulator used by tests and the bubble report.
#include "plan/pipeline_schedule.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "common/error.hpp"
#include "plan/zero_bubble_schedule.hpp"

namespace dtrain {
namespace {

StageActions afab(int m) {
  StageActions a;
  for (int i = 0; i < m; ++i) a.push_back({PipelineAction::forward, i, 0});
  for (int i = 0; i < m; ++i) a.push_back({PipelineAction::backward, i, 0});
  return a;
}

StageActions one_f_one_b(int p, int m, int stage) {
  const int warmup = std::min(p - stage - 1, m);
  StageActions a;
  int f = 0, b = 0;
  for (; f < warmup; ++f) a.push_back({PipelineAction::forward, f, 0});          // warmup forwards
  for (; f < m; ++f, ++b) {                                                        // steady state
    a.push_back({PipelineAction::forward, f, 0});
    a.push_back({PipelineAction::backward, b, 0});
  }
  for (; b < m; ++b) a.push_back({PipelineAction::backward, b, 0});              // cooldown
  return a;
}

// Interleaved: chunk-forwards go through the micro-batches in groups: every chunk of a group, in chunk
// order, before the next group. Groups hold p micro-batches, except the first, which also takes the
// remainder m % p (so any m >= p works, and the bubble stays (p-1)/(v*m+p-1); a short group at the end
// instead would leave stages idle). The k-th backward is the k-th entry of the same table with the
// chunk order reversed; the warmup covers the first group's other chunks.
std::vector<PipelineAction> interleaved_table(int p, int m, int v) {
  std::vector<PipelineAction> table;
  const int g0 = p + m % p;
  for (int first = 0; first < m; first = first == 0 ? g0 : first + p) {
    const int last = first == 0 ? g0 : first + p;
    for (int chunk = 0; chunk < v; ++chunk)
      for (int mb = first; mb < last; ++mb) table.push_back({PipelineAction::forward, mb, chunk});
  }
  return table;
}

// Chunk-forwards of the interleaved schedule's warmup on `stage` (before its first backward).
long interleaved_warmup(long p, long m, long v, long stage) { return (p - stage - 1) * 2 + (v - 1) * (p + m % p); }

StageActions interleaved(int p, int m, int v, int stage) {
  const std::vector<PipelineAction> table = interleaved_table(p, m, v);
  const int total = m * v;
  const int warmup = static_cast<int>(std::min<long>(total, interleaved_warmup(p, m, v, stage)));
  auto backward = [&](int k) { return PipelineAction{PipelineAction::backward, table[k].micro_batch, v - 1 - table[k].chunk}; };
  StageActions a;
  int f = 0, b = 0;
  for (; f < warmup; ++f) a.push_back(table[f]);
  for (; f < total; ++f, ++b) {
    a.push_back(table[f]);
    a.push_back(backward(b));
  }
  for (; b < total; ++b) a.push_back(backward(b));
  return a;
}

}  // namespace

StageActions schedule_actions(PipelineSchedule schedule, int p, int m, int v, int stage) {
  switch (schedule) {
    case PipelineSchedule::afab: return afab(m);
    case PipelineSchedule::one_f_one_b: return one_f_one_b(p, m, stage);
    case PipelineSchedule::interleaved:
      if (m < p) throw UserError("the interleaved schedule needs at least as many micro-batches as pipeline stages");
      return interleaved(p, m, v, stage);
    case PipelineSchedule::zb_h1: return zb_h1_actions(p, m, stage);
    case PipelineSchedule::zbv:
      if (v != 2) throw UserError("the zbv schedule places two model chunks on every stage (virtual_pipeline_model_parallel_size=2)");
      return zbv_actions(p, m)[static_cast<std::size_t>(stage)];
  }
  return {};
}

int virtual_stage(PipelineSchedule schedule, int p, int stage, int chunk) {
  if (schedule == PipelineSchedule::zbv) return chunk == 0 ? stage : 2 * p - 1 - stage;
  return chunk * p + stage;
}

StageChunk stage_chunk(PipelineSchedule schedule, int p, int vs) {
  if (schedule == PipelineSchedule::zbv) return vs < p ? StageChunk{vs, 0} : StageChunk{2 * p - 1 - vs, 1};
  return {vs % p, vs / p};
}

bool splits_backward(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::zb_h1 || schedule == PipelineSchedule::zbv;
}

StageActions forward_only(const StageActions& actions) {
  StageActions f;
  for (const auto& a : actions)
    if (a.kind == PipelineAction::forward) f.push_back(a);
  return f;
}

double predicted_bubble(PipelineSchedule schedule, int p, int m, int v) {
  if (p <= 1) return 0.0;
  if (splits_backward(schedule)) {
    // The planner asks for many layouts of few (schedule, p, m): each simulated once.
    static std::mutex mutex;
    static std::map<std::tuple<PipelineSchedule, int, int>, double> known;
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = known.find({schedule, p, m}); it != known.end()) return it->second;
    std::vector<StageActions> stages;
    if (schedule == PipelineSchedule::zbv)
      stages = zbv_actions(p, m);
    else
      for (int s = 0; s < p; ++s) stages.push_back(zb_h1_actions(p, m, s));
    const SimulationResult r = simulate_schedule(stages, schedule, m, schedule == PipelineSchedule::zbv ? 2 : 1, ActionCosts{});
    if (!r.ok) fatal("internal error: the " + std::string(to_string(schedule)) + " schedule does not run: " + r.problem);
    return known[{schedule, p, m}] = *std::max_element(r.idle.begin(), r.idle.end()) / r.makespan;
  }
  const int chunks = schedule == PipelineSchedule::interleaved ? v : 1;
  return static_cast<double>(p - 1) / (static_cast<double>(chunks) * m + p - 1);
}

int max_in_flight(PipelineSchedule schedule, int p, int m, int v, int stage) {
  switch (schedule) {
    case PipelineSchedule::afab: return m;
    case PipelineSchedule::interleaved:
      return static_cast<int>(std::min<long>(static_cast<long>(m) * v, interleaved_warmup(p, m, v, stage) + 1));
    case PipelineSchedule::zb_h1: return std::min(m, p);
    case PipelineSchedule::zbv: return std::min(2 * p, 2 * m);  // the scheduler's bound, whatever its costs
    case PipelineSchedule::one_f_one_b: break;
  }
  return std::min(m, p - stage);
}

std::string stage_actions_problem(const StageActions& actions, int m, int v) {
  // Per (micro-batch, chunk): 0 nothing yet, 1 forward done, 2 input gradient done, 3 finished.
  std::vector<int> state(static_cast<std::size_t>(m) * static_cast<std::size_t>(std::max(v, 0)), 0);
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    const std::string at = " at action " + std::to_string(i) + " (micro-batch " + std::to_string(a.micro_batch) + ", chunk " +
                           std::to_string(a.chunk) + ")";
    if (a.micro_batch < 0 || a.micro_batch >= m || a.chunk < 0 || a.chunk >= v) return "an action out of range" + at;
    int& s = state[static_cast<std::size_t>(a.micro_batch) * static_cast<std::size_t>(v) + static_cast<std::size_t>(a.chunk)];
    const int before = a.kind == PipelineAction::forward ? 0 : a.kind == PipelineAction::weight_grad ? 2 : 1;
    if (s != before)
      return std::string(a.kind == PipelineAction::forward       ? "a repeated forward"
                         : a.kind == PipelineAction::weight_grad ? "a weight gradient without its input gradient, or repeated"
                                                                 : "a backward without its forward, or repeated") +
             at;
    s = a.kind == PipelineAction::input_grad ? 2 : a.kind == PipelineAction::forward ? 1 : 3;
  }
  for (std::size_t k = 0; k < state.size(); ++k)
    if (state[k] != 3)
      return "micro-batch " + std::to_string(k / static_cast<std::size_t>(v)) + ", chunk " + std::to_string(k % static_cast<std::size_t>(v)) +
             (state[k] == 0 ? " never runs" : state[k] == 1 ? " has no backward" : " has no weight gradient");
  return {};
}

int peak_in_flight(const StageActions& actions) {
  int now = 0, peak = 0;
  for (const auto& a : actions) {
    if (a.kind == PipelineAction::forward) ++now;
    if (a.kind == PipelineAction::backward || a.kind == PipelineAction::weight_grad) --now;
    peak = std::max(peak, now);
  }
  return peak;
}

SimulationResult simulate_schedule(const std::vector<StageActions>& stages, PipelineSchedule schedule, int m, int v,
                                   const ActionCosts& costs) {
  const int p = static_cast<int>(stages.size());
  SimulationResult r;
  r.idle.assign(p, 0.0);
  const int virtual_stages = v * p;
  constexpr double kNotYet = -1.0;
  // Completion times [kind: 0 forward, 1 backward or B, 2 W][virtual stage][micro-batch].
  std::vector<std::vector<std::vector<double>>> finish(3, std::vector<std::vector<double>>(virtual_stages, std::vector<double>(m, kNotYet)));
  std::vector<std::size_t> next(p, 0);
  std::vector<double> clock(p, 0.0);
  const auto fail = [&](const std::string& what, int s, const PipelineAction& a) {
    r.problem = what + " (micro-batch " + std::to_string(a.micro_batch) + ", chunk " + std::to_string(a.chunk) + ") on stage " +
                std::to_string(s);
    return r;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      if (next[s] >= stages[s].size()) continue;
      const PipelineAction& a = stages[s][next[s]];
      if (a.micro_batch < 0 || a.micro_batch >= m || a.chunk < 0 || a.chunk >= v) return fail("an action out of range", s, a);
      const int vs = virtual_stage(schedule, p, s, a.chunk);
      const int kind = a.kind == PipelineAction::forward ? 0 : a.kind == PipelineAction::weight_grad ? 2 : 1;
      if (finish[kind][vs][a.micro_batch] != kNotYet || (kind == 1 && finish[2][vs][a.micro_batch] != kNotYet))
        return fail("a repeated action", s, a);
      double ready = 0.0;
      bool can_run = true;
      const auto after = [&](double t) {
        if (t == kNotYet) can_run = false;
        ready = std::max(ready, t);
      };
      if (kind == 0) {
        if (vs > 0) after(finish[0][vs - 1][a.micro_batch]);
      } else if (kind == 1) {
        if (finish[0][vs][a.micro_batch] == kNotYet) return fail("a backward before its forward", s, a);
        ready = finish[0][vs][a.micro_batch];
        if (vs < virtual_stages - 1) after(finish[1][vs + 1][a.micro_batch]);
      } else {
        if (finish[1][vs][a.micro_batch] == kNotYet) return fail("a weight gradient before its input gradient", s, a);
        ready = finish[1][vs][a.micro_batch];
      }
      if (!can_run) continue;
      const double cost = a.kind == PipelineAction::forward      ? costs.forward
                          : a.kind == PipelineAction::input_grad  ? costs.input_grad
                          : a.kind == PipelineAction::weight_grad ? costs.weight_grad
                                                                   : costs.input_grad + costs.weight_grad;
      const double start = std::max(clock[s], ready);
      r.idle[s] += start - clock[s];
      clock[s] = start + cost;
      finish[kind][vs][a.micro_batch] = clock[s];
      if (a.kind == PipelineAction::backward) finish[2][vs][a.micro_batch] = clock[s];  // a whole backward is B and W
      ++next[s];
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[s] < stages[s].size()) {
      r.problem = "deadlock: stage " + std::to_string(s) + " waits forever at action " + std::to_string(next[s]);
      return r;
    }
  for (int vs = 0; vs < virtual_stages; ++vs)
    for (int mb = 0; mb < m; ++mb)
      if (finish[0][vs][mb] == kNotYet || finish[1][vs][mb] == kNotYet || finish[2][vs][mb] == kNotYet) {
        const StageChunk at = stage_chunk(schedule, p, vs);
        return fail("a missing action", at.stage, PipelineAction{PipelineAction::forward, mb, at.chunk});
      }
  r.makespan = *std::max_element(clock.begin(), clock.end());
  // Idle also counts the tail after a stage's last action until the step ends.
  for (int s = 0; s < p; ++s) r.idle[s] += r.makespan - clock[s];
  r.ok = true;
  return r;
}

}  // namespace dtrain
