// zb-h1 by its rule, zbv by an event-driven greedy list scheduler.
#include "plan/zero_bubble_schedule.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"

namespace dtrain {

StageActions zb_h1_actions(int p, int m, int stage) {
  const int warmup = std::min(p - stage - 1, m), lag = stage;
  StageActions a;
  int f = 0, b = 0, w = 0;
  const auto backward = [&] {
    a.push_back({PipelineAction::input_grad, b++, 0});
    if (b - w > lag) a.push_back({PipelineAction::weight_grad, w++, 0});
  };
  for (; f < warmup; ++f) a.push_back({PipelineAction::forward, f, 0});
  while (f < m) {
    a.push_back({PipelineAction::forward, f++, 0});
    backward();
  }
  while (b < m) backward();
  while (w < m) a.push_back({PipelineAction::weight_grad, w++, 0});
  return a;
}

namespace {

// One greedy run; empty when it gets stuck (every stage holding its limit of activations while the
// forward that would start the next B waits: possible when Bs cost far more than Fs). reserve: a
// stage keeps its last free slot for its second chunk's forward, which the B chain needs first; that
// run never gets stuck.
std::vector<StageActions> zbv_greedy(int p, int m, const ActionCosts& costs, bool reserve) {
  constexpr int v = 2;
  const int virtual_stages = v * p, limit = 2 * p;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  // Finish times of the forwards and Bs, [virtual stage][micro-batch].
  std::vector<std::vector<double>> fwd(virtual_stages, std::vector<double>(m, kNever)), bwd = fwd;
  struct Stage {
    int next_f[v] = {0, 0}, next_b[v] = {0, 0}, next_w[v] = {0, 0};
    int held = 0;
    double free_at = 0.0;
  };
  std::vector<Stage> st(p);
  std::vector<StageActions> out(p);
  const long total = 3L * m * v * p;
  long done = 0;
  double now = 0.0;
  const auto vs = [&](int s, int c) { return virtual_stage(PipelineSchedule::zbv, p, s, c); };
  while (done < total) {
    for (int s = 0; s < p; ++s) {
      Stage& g = st[s];
      if (g.free_at > now) continue;
      PipelineAction pick{PipelineAction::forward, -1, 0};
      for (int c : {1, 0}) {  // the deeper chunk (1) first
        const int mb = g.next_b[c], at = vs(s, c);
        if (mb < g.next_f[c] && fwd[at][mb] <= now && (at == virtual_stages - 1 || bwd[at + 1][mb] <= now)) {
          pick = {PipelineAction::input_grad, mb, c};
          break;
        }
      }
      if (pick.micro_batch < 0 && g.held < limit)
        for (int c : {1, 0}) {
          const int mb = g.next_f[c], at = vs(s, c);
          if (reserve && c == 0 && g.held + 1 >= limit) continue;
          if (mb < m && (at == 0 || fwd[at - 1][mb] <= now)) {
            pick = {PipelineAction::forward, mb, c};
            break;
          }
        }
      if (pick.micro_batch < 0) {  // the oldest pending W
        double oldest = kNever;
        for (int c : {0, 1})
          if (const int mb = g.next_w[c]; mb < g.next_b[c] && bwd[vs(s, c)][mb] < oldest)
            oldest = bwd[vs(s, c)][mb], pick = {PipelineAction::weight_grad, mb, c};
      }
      if (pick.micro_batch < 0) continue;
      g.free_at = now + (pick.kind == PipelineAction::forward      ? costs.forward
                         : pick.kind == PipelineAction::input_grad ? costs.input_grad
                                                                   : costs.weight_grad);
      const int at = vs(s, pick.chunk);
      if (pick.kind == PipelineAction::forward) fwd[at][pick.micro_batch] = g.free_at, ++g.next_f[pick.chunk], ++g.held;
      if (pick.kind == PipelineAction::input_grad) bwd[at][pick.micro_batch] = g.free_at, ++g.next_b[pick.chunk];
      if (pick.kind == PipelineAction::weight_grad) ++g.next_w[pick.chunk], --g.held;
      out[s].push_back(pick);
      ++done;
    }
    // The next event: a stage becoming free (every finish time is one).
    double next = kNever;
    for (const Stage& g : st)
      if (g.free_at > now) next = std::min(next, g.free_at);
    if (next == kNever && done < total) return {};
    now = next;
  }
  return out;
}

}  // namespace

std::vector<StageActions> zbv_actions(int p, int m, const ActionCosts& costs) {
  // Both greedy runs; the one the simulation at these costs finishes first (the plain one on a tie).
  std::vector<StageActions> plain = zbv_greedy(p, m, costs, false), reserved = zbv_greedy(p, m, costs, true);
  if (reserved.empty()) fatal("internal error: the zbv scheduler got stuck with a reserved slot");
  if (plain.empty()) return reserved;
  const SimulationResult a = simulate_schedule(plain, PipelineSchedule::zbv, m, 2, costs);
  const SimulationResult b = simulate_schedule(reserved, PipelineSchedule::zbv, m, 2, costs);
  if (!a.ok || !b.ok) fatal("internal error: a zbv order does not run: " + a.problem + b.problem);
  return b.makespan < a.makespan ? reserved : plain;
}

}  // namespace dtrain
