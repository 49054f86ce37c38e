// The interval between two logged steps: what the steps in it took (time, waiting, all-to-alls, busy
// compute for the straggler report), the saves at their boundaries, their MoE statistics and an fp16
// run's skipped updates and loss scale, averaged
// into the step record when the interval is logged.
#pragma once
#include "train/checkpointing.hpp"
#include "train/step_log.hpp"
#include "train/trainer.hpp"

namespace dtrain {

class LogWindow {
 public:
  // One step: its wall time, the part not spent in communication, its result and its saves.
  void add(double step_seconds, double busy_seconds, const StepResult& r, const CheckpointTimes& saves);
  // Averages over the interval's steps into rec (step time, bubble, all-to-all, save stalls, MoE), then
  // starts a new interval. busy_seconds() reads the interval's average before take.
  void take(StepRecord& rec, int experts, bool expert_parallel);
  double busy_seconds() const { return steps_ > 0 ? busy_ / steps_ : 0.0; }

 private:
  double seconds_ = 0.0, bubble_ = 0.0, busy_ = 0.0, all_to_all_ = 0.0;
  double save_stall_ = 0.0, sync_save_ = 0.0;  // checkpoints at the interval's step boundaries
  bool saved_ = false, sync_ = false;
  int steps_ = 0;
  int skipped_ = 0;  // fp16: updates skipped for overflowing gradients
  std::optional<double> loss_scale_;  // fp16: after the interval's last step
  MoeWindow moe_;
};

}  // namespace dtrain
