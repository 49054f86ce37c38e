// stage_p2p_ops mirrors PipelineExecutor::run (which checks it op by op); nccl_groups mirrors the
// executor's flush_sends calls and NcclCommunicator's held-back sends;
// simulate_rendezvous matches ops pairwise in issue order until every group is done or none can move.
#include "plan/p2p_traffic.hpp"

#include <algorithm>

namespace dtrain {

std::vector<P2pOp> stage_p2p_ops(const StageActions& actions, PipelineSchedule schedule, int p, int v, int stage) {
  std::vector<P2pOp> ops;
  const int last_virtual = v * p - 1;
  // A neighbouring virtual stage on this same stage (zbv's turn of the V) is handed over in memory.
  const auto peer = [&](int vs) { return stage_chunk(schedule, p, vs).stage; };
  for (const PipelineAction& a : actions) {
    const int vs = virtual_stage(schedule, p, stage, a.chunk);
    const bool from_prev = vs > 0 && peer(vs - 1) != stage, to_next = vs < last_virtual && peer(vs + 1) != stage;
    if (a.kind == PipelineAction::forward) {
      if (from_prev) ops.push_back({false, peer(vs - 1), 0, a.micro_batch, vs});
      if (to_next) ops.push_back({true, peer(vs + 1), 0, a.micro_batch, vs + 1});
    } else if (a.kind != PipelineAction::weight_grad) {
      if (to_next) ops.push_back({false, peer(vs + 1), 1, a.micro_batch, vs});
      if (from_prev) ops.push_back({true, peer(vs - 1), 1, a.micro_batch, vs - 1});
    }
  }
  return ops;
}

bool send_joins_next_receive(const std::vector<P2pOp>& ops, std::size_t i) {
  return ops.at(i).send && i + 1 < ops.size() && !ops[i + 1].send;
}

std::vector<std::vector<P2pOp>> nccl_groups(const std::vector<P2pOp>& ops) {
  std::vector<std::vector<P2pOp>> groups;
  std::vector<P2pOp> held;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    held.push_back(ops[i]);
    if (!send_joins_next_receive(ops, i)) groups.push_back(std::move(held)), held.clear();
  }
  return groups;
}

namespace {

std::string describe(int stage, const P2pOp& op) {
  return std::string(op.send ? "send" : "receive") + " of the " + (op.direction == 0 ? "activation" : "gradient") +
         " of micro-batch " + std::to_string(op.micro_batch) + " (virtual stage " + std::to_string(op.virtual_stage) + ") on stage " +
         std::to_string(stage) + (op.send ? " to " : " from ") + "stage " + std::to_string(op.peer);
}

}  // namespace

RendezvousResult simulate_rendezvous(const std::vector<std::vector<std::vector<P2pOp>>>& groups) {
  const int p = static_cast<int>(groups.size());
  std::vector<std::size_t> current(p, 0);               // running group per stage
  std::vector<std::vector<char>> done(p);               // per op of the running group
  auto start = [&](int s) {
    if (current[s] < groups[s].size()) done[s].assign(groups[s][current[s]].size(), 0);
  };
  for (int s = 0; s < p; ++s) start(s);
  // The first op of the running group of `s` that is still open and goes to / comes from `peer`:
  // ops between a pair are matched in issue order, so only that one can match now.
  auto first_open = [&](int s, bool send, int peer) -> int {
    if (current[s] >= groups[s].size()) return -1;
    const auto& g = groups[s][current[s]];
    for (std::size_t i = 0; i < g.size(); ++i)
      if (!done[s][i] && g[i].send == send && g[i].peer == peer) return static_cast<int>(i);
    return -1;
  };
  RendezvousResult r;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      if (current[s] >= groups[s].size()) continue;
      const auto& g = groups[s][current[s]];
      for (std::size_t i = 0; i < g.size(); ++i) {
        if (done[s][i] || !g[i].send || first_open(s, true, g[i].peer) != static_cast<int>(i)) continue;
        const int peer = g[i].peer;
        const int j = first_open(peer, false, s);
        if (j < 0) continue;
        const P2pOp& recv = groups[peer][current[peer]][static_cast<std::size_t>(j)];
        if (!g[i].same_message(recv)) {
          r.problem = describe(s, g[i]) + " is matched with the " + describe(peer, recv);
          return r;
        }
        done[s][i] = done[peer][static_cast<std::size_t>(j)] = 1;
        progress = true;
      }
    }
    for (int s = 0; s < p; ++s)
      while (current[s] < groups[s].size() && std::find(done[s].begin(), done[s].end(), 0) == done[s].end()) {
        ++current[s];
        start(s);
        progress = true;
      }
  }
  for (int s = 0; s < p; ++s)
    if (current[s] < groups[s].size()) {
      const auto& g = groups[s][current[s]];
      for (std::size_t i = 0; i < g.size(); ++i)
        if (!done[s][i]) {
          r.problem = "deadlock: the " + describe(s, g[i]) + " never completes";
          return r;
        }
    }
  r.ok = true;
  return r;
}

bool nccl_pipeline_safe(const std::vector<StageActions>& stages, PipelineSchedule schedule, int v) {
  const int p = static_cast<int>(stages.size());
  if (p < 2) return true;
  for (bool forwards_only : {false, true}) {
    std::vector<std::vector<std::vector<P2pOp>>> groups;
    for (int s = 0; s < p; ++s)
      groups.push_back(nccl_groups(stage_p2p_ops(forwards_only ? forward_only(stages[s]) : stages[s], schedule, p, v, s)));
    if (!simulate_rendezvous(groups).ok) return false;
  }
  return true;
}

bool nccl_pipeline_safe(PipelineSchedule schedule, int p, int m, int v) {
  std::vector<StageActions> stages;
  for (int s = 0; s < p; ++s) stages.push_back(schedule_actions(schedule, p, m, v, s));
  return nccl_pipeline_safe(stages, schedule, v);
}

}  // namespace dtrain
