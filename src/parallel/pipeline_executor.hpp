// Runs one stage's pipeline actions for one optimizer step: loads micro-batches, moves activations and
// gradients between stages, keeps at most the schedule's bound of (micro-batch, chunk) activation
// slots, and measures the time the stage waits (its bubble).
// No schedule relies on MPI buffering: receives block in the order of the stage's actions, and sends
// go out through the outbox and are completed only after the stage's last action. A run is therefore
// the execution with unbounded buffers that simulate_schedule() proves deadlock-free.
#pragma once
#include <mpi.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "model/gpt.hpp"
#include "parallel/pipeline_outbox.hpp"
#include "parallel/pipeline_schedule.hpp"
#include "runtime/parallel_state.hpp"

namespace dtrain {

struct PipelineStepStats {
  double loss_sum = 0.0;       // summed token losses (last stage; 0 elsewhere)
  double wait_seconds = 0.0;   // blocked on receives and send completions
  double total_seconds = 0.0;  // whole step on this stage
};

class PipelineExecutor {
 public:
  // `model` holds the stage's chunks and one activation slot per in-flight activation of `actions`.
  PipelineExecutor(GptModel& model, const ParallelState& ps, StageActions actions, int num_micro_batches, int chunks,
                   bool synchronous_sends = false);

  // load(slot, micro_batch) fills the slot's tokens and targets. loss_scale weights every token loss.
  // forward_only: the actions are all forwards (evaluation); slots are freed right after each one.
  PipelineStepStats run(const std::function<void(int, int)>& load, float loss_scale, bool forward_only = false);

  // Slots a model needs for these actions (one for a forward-only list: each slot is freed at once).
  static int slots_needed(const StageActions& actions);

 private:
  int virtual_stage(int chunk) const { return chunk * p_ + stage_; }
  int tag(int micro_batch, int receiving_virtual_stage, int direction) const;

  GptModel& model_;
  const ParallelState& ps_;
  StageActions actions_;
  int m_, v_, p_, stage_;
  std::vector<int> free_slots_;
  std::map<std::pair<int, int>, int> slot_of_;  // (micro-batch, chunk) -> slot
  std::vector<float> grad_in_;                  // (Ns,C) gradient received from the next stage
  PipelineOutbox outbox_;                       // (Ns,C) activations and gradients on their way out
};

}  // namespace dtrain
