// The pipeline's point-to-point traffic as a transport without buffering sees it, as pure data: every
// receive and send a stage issues (the executor's order), the groups in which the NCCL backend
// launches them (a send that the stage's next operation is a receive waits for it and goes out
// together with it, as Megatron's send-forward-receive-backward pairs; any other send goes out
// alone at once, so warm-up activations flow while the stage computes), and a simulation of those groups with rendezvous
// semantics: a send completes only with its receive, sends and receives between two ranks are matched
// in the order they are issued (NCCL has no tags), a stage runs its groups one after another and the
// operations inside a group together. The simulation proves every schedule deadlock-free and every
// message delivered to the receive that expects it.
#pragma once
#include <string>
#include <vector>

#include "plan/pipeline_schedule.hpp"

namespace dtrain {

struct P2pOp {
  bool send = false;
  int peer = 0;          // the other stage
  int direction = 0;     // 0: activation (forward), 1: gradient (backward)
  int micro_batch = 0;
  int virtual_stage = 0; // the receiving virtual stage
  bool same_message(const P2pOp& o) const {
    return direction == o.direction && micro_batch == o.micro_batch && virtual_stage == o.virtual_stage;
  }
};

// The receives and sends of `stage`'s actions, in the order the pipeline executor issues them (chunks
// placed as `schedule` places them; a weight_grad sends nothing).
std::vector<P2pOp> stage_p2p_ops(const StageActions& actions, PipelineSchedule schedule, int p, int v, int stage);

// Whether the NCCL backend holds ops[i] (a send) back to launch it together with ops[i + 1]: exactly
// when ops[i + 1] is a receive. The pipeline executor asks this for every send it issues.
bool send_joins_next_receive(const std::vector<P2pOp>& ops, std::size_t i);

// Ops grouped as the NCCL backend launches them.
std::vector<std::vector<P2pOp>> nccl_groups(const std::vector<P2pOp>& ops);

struct RendezvousResult {
  bool ok = false;
  std::string problem;  // the deadlock or the mismatched message
};
// groups[stage] = that stage's groups in launch order.
RendezvousResult simulate_rendezvous(const std::vector<std::vector<std::vector<P2pOp>>>& groups);

// Whether NCCL can carry the pipeline's messages for this schedule: the training step and the
// evaluation pass (its forwards alone) both run to the end under simulate_rendezvous with nccl_groups.
// Holds for 1F1B and AFAB at every (p, m) tested and for interleaved 1F1B with m < 2p; otherwise
// the pipeline's messages go through MPI (deadlock-free with buffering sends) while NCCL does the rest.
bool nccl_pipeline_safe(PipelineSchedule schedule, int p, int m, int v);
// The same for given lists of every stage (another order of a schedule's actions).
bool nccl_pipeline_safe(const std::vector<StageActions>& stages, PipelineSchedule schedule, int v);

}  // namespace dtrain
