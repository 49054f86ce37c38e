// Runs one stage's pipeline actions for one optimizer step: loads micro-batches, moves activations and
// gradients between stages with non-blocking sends and posted receives, keeps at most the schedule's
// bound of (micro-batch, chunk) activation slots, and measures the time the stage waits (its bubble).
#pragma once
#include <mpi.h>

#include <deque>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "model/gpt.hpp"
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
  PipelineExecutor(GptModel& model, const ParallelState& ps, StageActions actions, int num_micro_batches, int chunks);

  // load(slot, micro_batch) fills the slot's tokens and targets. loss_scale weights every token loss.
  // forward_only: the actions are all forwards (evaluation); slots are freed right after each one.
  PipelineStepStats run(const std::function<void(int, int)>& load, float loss_scale, bool forward_only = false);

  // Slots a model needs for these actions (one for a forward-only list: each slot is freed at once).
  static int slots_needed(const StageActions& actions);

 private:
  int virtual_stage(int chunk) const { return chunk * p_ + stage_; }
  int tag(int micro_batch, int receiving_virtual_stage, int direction) const;
  int acquire_slot(double& wait);
  void wait_all(std::vector<MPI_Request>& requests, double& wait);

  GptModel& model_;
  const ParallelState& ps_;
  StageActions actions_;
  int m_, v_, p_, stage_;
  std::deque<int> free_slots_;  // least recently freed first: its sends have had the longest to finish
  std::vector<std::vector<MPI_Request>> slot_sends_;  // sends still reading from a slot
  std::map<std::pair<int, int>, int> slot_of_;        // (micro-batch, chunk) -> slot
  std::vector<float> grad_in_;                        // (Ns,C) gradient received from the next stage
};

}  // namespace dtrain
