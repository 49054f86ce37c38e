// When and how a training run saves and resumes: checkpoint.dir / save_interval / keep_last / load.
// load = auto resumes from <dir>/latest when present, none starts fresh, anything else is a path to a
// step directory. Resuming works on any layout; the step, data position and learning-rate schedule
// follow from the saved step (samples are chosen by seed and step). With no checkpoint to resume,
// checkpoint.init_from starts from a weights file's model, or a Hugging Face directory's (hf:DIR) (any
// layout, fresh optimizer, step 0).
// checkpoint.async_save: a save copies the rank's pieces into a snapshot and writes them on a
// BackgroundWrite; the ranks agree at later step boundaries (poll) that every write finished, then
// publish. Saves are timed: how long training stalled for them (take_times) goes to the step line.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/snapshot.hpp"
#include "comm/host_comm.hpp"
#include "config/config.hpp"
#include "train/background_write.hpp"
#include "train/step_log.hpp"
#include "train/trainer.hpp"

namespace dtrain {

// Time training spent on checkpoints between two take_times() calls.
struct CheckpointTimes {
  double stall_s = 0.0;      // training stopped: whole saves, snapshots, waits for writes, polls, publication
  double sync_save_s = 0.0;  // of which whole saves written on the main thread
  bool any = false;          // a save was written, snapshot, waited for or published
  bool sync = false;         // one of them was a whole save
};

class Checkpointing {
 public:
  // tokenizer: the identity of data.tokenizer, stored in every checkpoint and required of the one resumed.
  Checkpointing(HostComm world, const Config& cfg, const TrainingPlan& plan, std::string config_text, std::string tokenizer,
                StepLog& log);
  // Loads the checkpoint asked for, else the init_from weights (collective); returns the number of steps
  // already done.
  int resume(Trainer& trainer);
  // Seconds the last load took on this rank (0 before any): the start-up report's share of loading.
  double last_load_seconds() const { return last_load_s_; }
  // Collective, after a non-finite step `bad_step` (1-based) with training.on_nonfinite=rollback: the
  // trainer drops the step, skips that step's batch from now on, and loads this run's latest checkpoint
  // (the one it resumed from or last published); returns its step. A UserError on every rank when there
  // is none.
  int rollback(Trainer& trainer, int bad_step);
  // Collective, before the first step: with checkpoint.async_save, the snapshot buffer is allocated and
  // its pages touched (a lack of memory shows at start, and the first save's stall is a copy).
  void prepare(Trainer& trainer);
  // A save at steps_done: the last step, every save_interval, and every validation with keep_best.
  bool due(int steps_done, bool last, bool validated) const;
  // Collective: saves step steps_done. A save in flight is published first. With checkpoint.async_save
  // and !wait: a snapshot, written in the background and published by a later poll() or finish();
  // else written and published before returning. Throws UserError on every rank if any rank's write
  // failed (the previous checkpoint stays latest).
  void save(Trainer& trainer, int steps_done, bool wait, std::optional<double> val_loss = std::nullopt);
  // Collective: loads this run's checkpoint of `step` (kept by keep_best) into the trainer, from
  // checkpoint.dir or the directory the run resumed from (a checkpoint.load=PATH elsewhere).
  int load_best(Trainer& trainer, int step);
  // Collective, at every step boundary: publishes the save in flight once every rank's write finished
  // (the same decision on every rank).
  void poll();
  // Collective: waits for the save in flight and publishes it. Before any other HDF5 use.
  void finish();
  // finish(), and the snapshot's memory goes back (the end of training: the final weights need it).
  void finish_and_release();
  CheckpointTimes take_times();

 private:
  std::string load_path() const;
  // Rank 0: this run's checkpoint of `step` in checkpoint.dir or resumed_dir_; UserError naming both
  // when neither holds it. `why` says what needs it.
  std::string best_checkpoint(int step, const std::string& why) const;
  Retention retention() const;  // checkpoint.keep_last and keep_best
  int load(Trainer& trainer, const std::string& path, const char* verb);  // collective; the step loaded
  void init_from_weights(Trainer& trainer);  // collective
  // The weights file `file` into the trainer (collective); source names where it came from in messages
  // ("" for the file itself).
  void load_init_weights(Trainer& trainer, const std::string& file, const std::string& source);
  // Rank 0: a warning when checkpoint.dir holds checkpoints this run does not resume from.
  void warn_about_other_checkpoints(const std::string& resume_path) const;
  CheckpointMeta meta_of(Trainer& trainer, int steps_done) const;  // collective (the checkpoint id)
  // Joins the writer (finished, or waited for since `since`), agrees and publishes.
  void publish_in_flight(std::chrono::steady_clock::time_point since);
  void remove_pruned();  // the pruned checkpoints set aside, here and now
  HostComm world_;
  const Config& cfg_;
  TrainingPlan plan_;
  std::string config_text_;
  std::string tokenizer_;  // the identity of data.tokenizer, stored in every save
  StepLog& log_;
  int rank_ = 0;
  Watchdog* watchdog_ = nullptr;  // the trainer's, from the first save
  Trace* trace_ = nullptr;
  CheckpointTimes times_;
  struct InFlight {
    bool active = false;
    SaveTarget target;
    double snapshot_s = 0.0;  // the stall at its step boundary
    double stall_s = 0.0;     // all the stall it caused so far
  } in_flight_;
  std::vector<std::string> pruned_;  // rank 0: pruned checkpoints set aside, removed by the next write
  double last_load_s_ = 0.0;
  std::string own_latest_;  // the checkpoint this run last resumed from or published: where a rollback goes
  std::uint64_t run_id_ = 0;  // this run's (CheckpointMeta::run_id): drawn at a fresh start, else the resumed one's
  std::string resumed_dir_;   // the directory of the checkpoint resumed from, where load_best also looks
  StateSnapshot snapshot_;
  BackgroundWrite writer_;  // declared after the snapshot it reads: joined before the buffer goes
};

}  // namespace dtrain
