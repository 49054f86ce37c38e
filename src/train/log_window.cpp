// LogWindow: per-interval sums of the step loop, averaged into the logged step record.
#include "train/log_window.hpp"

namespace dtrain {

void LogWindow::add(double step_seconds, double busy_seconds, const StepResult& r, const CheckpointTimes& saves) {
  seconds_ += step_seconds;
  busy_ += busy_seconds;
  bubble_ += r.bubble;
  all_to_all_ += r.all_to_all_s;
  moe_.add(r.moe_aux, r.moe_tokens);
  save_stall_ += saves.stall_s;
  sync_save_ += saves.sync_save_s;
  saved_ = saved_ || saves.any;
  sync_ = sync_ || saves.sync;
  skipped_ += r.skipped ? 1 : 0;
  if (r.loss_scale > 0) loss_scale_ = r.loss_scale;
  ++steps_;
}

void LogWindow::take(StepRecord& rec, int experts, bool expert_parallel) {
  rec.step_seconds = seconds_ / steps_;
  rec.bubble = bubble_ / steps_;
  if (expert_parallel) rec.all_to_all_s = all_to_all_ / steps_;
  if (saved_) rec.save_stall_s = save_stall_;
  if (sync_) rec.sync_save_s = sync_save_;
  rec.loss_scale = loss_scale_;
  rec.skipped = skipped_;
  moe_.take(rec, experts);
  *this = LogWindow{};
}

}  // namespace dtrain
