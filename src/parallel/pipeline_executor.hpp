// Runs one stage's pipeline actions for one optimizer step: computes through a PipelineStage, moves
// activations and gradients between stages, keeps at most the schedule's bound of (micro-batch,
// chunk) activation slots, and measures the time the stage waits (its bubble).
// No schedule relies on MPI buffering: receives block in the order of the stage's actions, and sends
// go out through the outbox and are completed only after the stage's last action. A run is therefore
// the execution with unbounded buffers that simulate_schedule() proves deadlock-free. A send that the
// stage's next operation is a receive is left to the backend to pair with it; every other send is
// flushed at once (the groups that simulate_rendezvous proves safe for NCCL).
#pragma once
#include <map>
#include <utility>
#include <vector>

#include "runtime/arena.hpp"

#include "parallel/pipeline_outbox.hpp"
#include "parallel/pipeline_stage.hpp"
#include "comm/parallel_state.hpp"
#include "plan/p2p_traffic.hpp"
#include "plan/pipeline_schedule.hpp"

namespace dtrain {

struct PipelineStepStats {
  double wait_seconds = 0.0;   // blocked on receives and send completions
  double total_seconds = 0.0;  // whole step on this stage
  // With set_timing(true): the seconds of the compute of each kind of action (the device synchronised
  // around each), whole backwards counted as input gradients, and how many ran.
  double seconds[3] = {0.0, 0.0, 0.0};  // forward, input gradient, weight gradient
  int count[3] = {0, 0, 0};
};

class PipelineExecutor {
 public:
  // `stage` holds at least one activation slot per in-flight activation of `actions`; `schedule` places
  // the chunks (virtual_stage).
  PipelineExecutor(PipelineStage& stage, const ParallelState& ps, PipelineSchedule schedule, StageActions actions, int num_micro_batches,
                   int chunks);

  // One pass over the actions. A list of forwards only (evaluation) frees each slot right after use.
  PipelineStepStats run();
  // The next runs time each action's compute (synchronising the device around it: slower).
  void set_timing(bool on) { timing_ = on; }
  // Another order of the same actions from now on (checked as the constructor checks its list).
  void reschedule(StageActions actions);

 private:
  int virtual_stage(int chunk) const { return dtrain::virtual_stage(schedule_, p_, stage_, chunk); }
  void check_actions() const;  // fatal when the list cannot run or needs more slots than the stage has
  int tag(int micro_batch, int receiving_virtual_stage, int direction) const;
  // The next op of p2p_ops_ (the one derivation of peers and tags), checked against what the loop is
  // about to do (a send or a receive, of which direction and micro-batch).
  const P2pOp& next_p2p_op(bool send, int direction, int micro_batch);
  int tag_of(const P2pOp& op) const { return tag(op.micro_batch, op.virtual_stage, op.direction); }

  PipelineStage& compute_;
  const ParallelState& ps_;
  PipelineSchedule schedule_;
  StageActions actions_;
  std::vector<P2pOp> p2p_ops_;                  // this stage's receives and sends in issue order
  std::size_t p2p_next_ = 0;
  int m_, v_, p_, stage_;
  std::vector<int> free_slots_;
  std::map<std::pair<int, int>, int> slot_of_;  // (micro-batch, chunk) -> slot
  Arena grad_in_;                               // (Ns,C) gradient received from the next stage
  std::map<int, Arena> local_grads_;            // zbv: per micro-batch, the gradient between the two chunks of the turn
  std::vector<Arena> spare_grads_;              // their buffers when not in use
  PipelineOutbox outbox_;                       // (Ns,C) activations and gradients on their way out
  bool forward_only_;                           // evaluation: each slot is freed right after its forward
  bool timing_ = false;
};

}  // namespace dtrain
