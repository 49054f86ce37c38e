// Schedule generators and a discrete-time simulator used by tests and the bubble report.
#include "plan/pipeline_schedule.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/error.hpp"

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
  }
  return {};
}

StageActions forward_only(const StageActions& actions) {
  StageActions f;
  for (const auto& a : actions)
    if (a.kind == PipelineAction::forward) f.push_back(a);
  return f;
}

double predicted_bubble(PipelineSchedule schedule, int p, int m, int v) {
  if (p <= 1) return 0.0;
  const int chunks = schedule == PipelineSchedule::interleaved ? v : 1;
  return static_cast<double>(p - 1) / (static_cast<double>(chunks) * m + p - 1);
}

int max_in_flight(PipelineSchedule schedule, int p, int m, int v, int stage) {
  switch (schedule) {
    case PipelineSchedule::afab: return m;
    case PipelineSchedule::interleaved:
      return static_cast<int>(std::min<long>(static_cast<long>(m) * v, interleaved_warmup(p, m, v, stage) + 1));
    case PipelineSchedule::one_f_one_b: break;
  }
  return std::min(m, p - stage);
}

int peak_in_flight(const StageActions& actions) {
  int now = 0, peak = 0;
  for (const auto& a : actions) {
    now += a.kind == PipelineAction::forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

SimulationResult simulate_schedule(const std::vector<StageActions>& stages, int v, double backward_cost) {
  const int p = static_cast<int>(stages.size());
  SimulationResult r;
  r.idle.assign(p, 0.0);
  // finish[kind][virtual stage][micro-batch] -> completion time
  std::map<std::tuple<int, int, int>, double> finish;
  std::vector<std::size_t> next(p, 0);
  std::vector<double> clock(p, 0.0);
  const int last_virtual = v * p - 1;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      if (next[s] >= stages[s].size()) continue;
      const PipelineAction& a = stages[s][next[s]];
      const int vs = a.chunk * p + s;
      double ready = 0.0;
      bool can_run = true;
      if (a.kind == PipelineAction::forward) {
        if (vs > 0) {
          auto it = finish.find({0, vs - 1, a.micro_batch});
          can_run = it != finish.end();
          if (can_run) ready = it->second;
        }
      } else {
        auto own = finish.find({0, vs, a.micro_batch});
        if (own == finish.end()) {
          r.problem = "backward of micro-batch " + std::to_string(a.micro_batch) + " before its forward on stage " + std::to_string(s);
          return r;
        }
        ready = own->second;
        if (vs < last_virtual) {
          auto it = finish.find({1, vs + 1, a.micro_batch});
          can_run = it != finish.end();
          if (can_run) ready = std::max(ready, it->second);
        }
      }
      if (!can_run) continue;
      const double start = std::max(clock[s], ready);
      r.idle[s] += start - clock[s];
      clock[s] = start + (a.kind == PipelineAction::forward ? 1.0 : backward_cost);
      finish[{a.kind == PipelineAction::forward ? 0 : 1, vs, a.micro_batch}] = clock[s];
      ++next[s];
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[s] < stages[s].size()) {
      r.problem = "deadlock: stage " + std::to_string(s) + " waits forever at action " + std::to_string(next[s]);
      return r;
    }
  r.makespan = *std::max_element(clock.begin(), clock.end());
  // Idle also counts the tail after a stage's last action until the step ends.
  for (int s = 0; s < p; ++s) r.idle[s] += r.makespan - clock[s];
  r.ok = true;
  return r;
}

}  // namespace dtrain
