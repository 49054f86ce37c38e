// Checkpointing: resume from latest or a path, periodic atomic saves (on the main thread or in the
// background), timing in the log.
#include "train/checkpointing.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>

#include "ckpt/checkpoint.hpp"
#include "ckpt/compatibility.hpp"
#include "plan/frozen_tensors.hpp"
#include "ckpt/convert.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/shard.hpp"
#include "ckpt/weights_file.hpp"
#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "dtrain_config.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {
namespace {

// A resume's optimizer state exists for the tensors that trained: the same training.freeze, or
// checkpoint.init_from (weights only) to train others.
void check_same_freeze(const std::string& saved, const std::string& run, const std::string& path) {
  if (freeze_patterns(saved) == freeze_patterns(run)) return;
  throw UserError("checkpoint '" + path + "' was saved with training.freeze='" + saved + "' and this run has '" + run +
                  "': its optimizer state is that of the tensors that trained; resume with the same training.freeze, or start "
                  "from its weights with checkpoint.init_from (and checkpoint.load=none)");
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string rate(double bytes, double seconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f MB in %.3f s (%.1f MB/s)", bytes / 1e6, seconds, bytes / 1e6 / std::max(seconds, 1e-9));
  return buf;
}

// "; by phase (slowest rank): data 0.120 s, ..." for a log line.
std::string by_phase(const IoPhaseSeconds& phases) {
  const std::string d = describe_io_phases(phases);
  return d.empty() ? d : "; by phase (slowest rank): " + d;
}

}  // namespace

Checkpointing::Checkpointing(HostComm world, const Config& cfg, const TrainingPlan& plan, std::string config_text,
                             std::string tokenizer, StepLog& log)
    : world_(world),
      cfg_(cfg),
      plan_(plan),
      config_text_(std::move(config_text)),
      tokenizer_(std::move(tokenizer)),
      log_(log) {
  rank_ = world.rank();
  if (rank_ == 0 && !cfg.checkpoint.dir.empty()) {
    const int stale = remove_stale_temporaries(cfg.checkpoint.dir);
    if (stale > 0) log_.message("checkpoint: removed " + std::to_string(stale) + " unfinished save(s) left by an interrupted run");
  }
}

void Checkpointing::warn_about_other_checkpoints(const std::string& resume_path) const {
  const std::string& dir = cfg_.checkpoint.dir;
  if (dir.empty()) return;
  const auto existing = published_checkpoints(dir);
  if (existing.empty()) return;
  std::string latest;
  try {
    latest = latest_checkpoint(dir);
  } catch (const UserError&) {
    latest = dir + "/latest (empty)";  // only checkpoint.load=auto must read it; this run does not
  }
  if (!latest.empty() && latest == resume_path) return;
  log_.message("warning: checkpoint.dir '" + dir + "' already holds " + std::to_string(existing.size()) + " checkpoint(s)" +
               (latest.empty() ? std::string() : " (latest: " + latest + ")") + " that this run does not resume from; its saves "
               "are published after them and become latest, and checkpoint.keep_last=" + std::to_string(cfg_.checkpoint.keep_last) +
               " removes the oldest publications first, whichever run made them");
}

std::string Checkpointing::load_path() const {
  const CheckpointLoad& load = cfg_.checkpoint.load;
  switch (load.mode) {
    case CheckpointLoad::Mode::none: return "";
    case CheckpointLoad::Mode::automatic: return cfg_.checkpoint.dir.empty() ? "" : latest_checkpoint(cfg_.checkpoint.dir);
    case CheckpointLoad::Mode::path: break;
  }
  return load.path;
}

int Checkpointing::resume(Trainer& trainer) {
  std::string path;
  collective_check(world_, [&] {
    if (rank_ != 0) return;
    path = load_path();
    warn_about_other_checkpoints(path);
  });
  broadcast_string(world_, path);
  if (path.empty()) {
    run_id_ = new_checkpoint_id(world_);  // a new run: keep_best ranks its checkpoints apart from others'
    if (!cfg_.checkpoint.init_from.empty()) init_from_weights(trainer);
    return 0;
  }
  if (!cfg_.checkpoint.init_from.empty())
    log_.message("checkpoint: resuming from " + path + "; checkpoint.init_from applies only when there is no checkpoint to resume");
  resumed_dir_ = std::filesystem::path(path).lexically_normal().parent_path().string();
  const int step = load(trainer, path, "resumed from");
  // Early stopping ends with the best validation's weights: the checkpoint that holds them must be
  // there now, not found missing after the whole run.
  const Trainer::Validations& v = trainer.validations();
  collective_check(world_, [&] {
    if (rank_ == 0 && cfg_.training.early_stop_patience > 0 && v.best)
      best_checkpoint(v.best_step, "training.early_stop_patience ends with the weights of the best validation so far (step " +
                                       std::to_string(v.best_step) + ", recorded in the checkpoint resumed)");
  });
  return step;
}

std::string Checkpointing::best_checkpoint(int step, const std::string& why) const {
  std::vector<std::string> dirs{cfg_.checkpoint.dir};
  if (!resumed_dir_.empty() && resumed_dir_ != std::filesystem::path(cfg_.checkpoint.dir).lexically_normal().string())
    dirs.push_back(resumed_dir_);
  if (std::string path = find_run_checkpoint(dirs, step, run_id_); !path.empty()) return path;
  std::string where = "'" + dirs[0] + "'";
  if (dirs.size() > 1) where += " nor '" + dirs[1] + "'";
  throw UserError(why + ", but neither " + where + " holds this run's checkpoint of step " + std::to_string(step) +
                  " (pruned or moved); put it back, set training.early_stop_patience=0, or start fresh (checkpoint.load=none)");
}

int Checkpointing::rollback(Trainer& trainer, int bad_step) {
  finish();  // a save in flight is published first: it may be the one to go back to
  // Only a checkpoint of this run (the one it resumed from, or its latest publication): another run's
  // in the same directory is not this run's past.
  std::string path = own_latest_;
  collective_check(world_, [&] {
    if (rank_ == 0 && path.empty())
      throw UserError("step " + std::to_string(bad_step) + " is not finite and training.on_nonfinite=rollback has no checkpoint of "
                      "this run to go back to; set checkpoint.save_interval so that one is saved before");
  });
  broadcast_string(world_, path);
  trainer.abandon_step();
  trainer.skip_batch(bad_step);
  return load(trainer, path, "rolled back to");
}

int Checkpointing::load(Trainer& trainer, const std::string& path, const char* verb) {
  const auto t0 = std::chrono::steady_clock::now();
  take_io_phases();  // this load's phases only
  own_latest_ = path;
  std::unique_ptr<CheckpointReader> reader;
  collective_check(world_, [&] {
    reader = std::make_unique<CheckpointReader>(path, /*hash_files=*/false);
    try {
      check_same_model(checkpoint_config(*reader), cfg_, "checkpoint '" + path + "'", "the checkpoint");
    } catch (const UserError& e) {
      throw UserError(std::string(e.what()) + ", or start fresh (checkpoint.load=none or another checkpoint.dir)");
    }
    check_made_with(cfg_.data.tokenizer, tokenizer_, reader->meta().tokenizer, "checkpoint '" + path + "'");
    check_same_freeze(checkpoint_config(*reader).training.freeze, cfg_.training.freeze, path);
  });
  // Each rank reads only the parts of pieces its slices overlap, which the pieces' checksums cannot
  // check: the shard files are hashed against the manifest instead, split over the ranks.
  const int size = world_.size();
  collective_check(world_, [&] { reader->verify_files(rank_, size); });
  const std::uint64_t read_before = h5::dataset_bytes_read();
  std::size_t state_bytes = 0;
  collective_check(world_, [&] {
    RankState st = trainer.state_to_load();
    load_rank_state(*reader, st);
    state_bytes = rank_state_bytes(st);
    trainer.load_state(st);
    const CheckpointMeta& meta = reader->meta();
    run_id_ = meta.run_id;  // a resume, rollback or best load goes on as the run that saved it
    trainer.set_skipped_steps(meta.skipped_steps);
    for (std::int64_t s : meta.skipped_batches) trainer.skip_batch(s);
    Trainer::Validations& v = trainer.validations();
    v = {};
    if (meta.validations)
      v = {meta.validations->best_loss, static_cast<int>(meta.validations->best_step), static_cast<int>(meta.validations->stale)};
    // The scaler of an fp16 run goes on where it was; a run of another precision resumed in fp16 starts
    // a fresh one (and an fp16 checkpoint resumed in bf16 or fp32 leaves its scaler behind).
    if (LossScaler* scaler = trainer.loss_scaler(); scaler && meta.loss_scaler)
      scaler->restore({meta.loss_scaler->scale, static_cast<int>(meta.loss_scaler->growth_tracker),
                       static_cast<int>(meta.loss_scaler->hysteresis_tracker)},
                      "checkpoint '" + path + "'");
  });
  const ReadReport read = read_report(world_, h5::dataset_bytes_read() - read_before, state_bytes);
  const CheckpointMeta& meta = reader->meta();
  const std::int64_t step = meta.step;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  last_load_s_ = seconds;
  IoPhaseSeconds phases = take_io_phases();
  for (double& s : phases) s = all_reduce(world_, s, HostOp::max);
  log_.message("checkpoint: " + std::string(verb) + " " + path + " at step " + std::to_string(step) + " (saved on " +
               to_string(meta.layout, ' ') + "); loaded " +
               rate(read.total_bytes, seconds) + ", " + read.text() + by_phase(phases));
  return static_cast<int>(step);
}

void Checkpointing::prepare(Trainer& trainer) {
  if (!cfg_.checkpoint.async_save || cfg_.checkpoint.dir.empty()) return;
  std::size_t bytes = 0;
  collective_check(world_, [&] { bytes = snapshot_.reserve(trainer.state_to_load()); });
  log_.message("checkpoint: asynchronous saves copy each rank's share into a host buffer first (" + std::to_string(bytes / 1000000) +
               " MB on rank 0, allocated now and kept)");
}

Retention Checkpointing::retention() const { return {cfg_.checkpoint.keep_last, cfg_.checkpoint.keep_best, run_id_}; }

int Checkpointing::load_best(Trainer& trainer, int step) {
  finish();
  std::string path;
  collective_check(world_, [&] {
    if (rank_ == 0) path = best_checkpoint(step, "early stopping loads the best validation's weights (step " + std::to_string(step) + ")");
  });
  broadcast_string(world_, path);
  return load(trainer, path, "early stop: loaded the best validation's checkpoint");
}

bool Checkpointing::due(int steps_done, bool last, bool validated) const {
  if (cfg_.checkpoint.dir.empty()) return false;
  if (last || (validated && cfg_.checkpoint.keep_best > 0)) return true;
  return cfg_.checkpoint.save_interval > 0 && steps_done % cfg_.checkpoint.save_interval == 0;
}

CheckpointMeta Checkpointing::meta_of(Trainer& trainer, int steps_done) const {
  CheckpointMeta meta;
  meta.skipped_steps = trainer.skipped_steps();
  meta.skipped_batches.assign(trainer.skipped_batches().begin(), trainer.skipped_batches().end());
  if (const Trainer::Validations& v = trainer.validations(); v.best)
    meta.validations = CheckpointMeta::Validations{*v.best, v.best_step, v.stale};
  if (const LossScaler* scaler = trainer.loss_scaler()) {
    const LossScalerState& s = scaler->state();
    meta.loss_scaler = CheckpointMeta::LossScaler{s.scale, s.growth_tracker, s.hysteresis_tracker};
  }
  meta.step = steps_done;
  meta.run_id = run_id_;
  meta.consumed_samples = static_cast<std::int64_t>(steps_done) * cfg_.model.global_batch_size;
  meta.layout = plan_.sizes;
  meta.order = cfg_.system.rank_order;
  meta.config_text = config_text_;
  meta.version = DTRAIN_VERSION;
  meta.tokenizer = tokenizer_;
  meta.checkpoint_id = new_checkpoint_id(world_);
  return meta;
}

void Checkpointing::save(Trainer& trainer, int steps_done, bool wait, std::optional<double> val_loss) {
  watchdog_ = trainer.watchdog();
  trace_ = trainer.trace();
  finish();  // the writer must be HDF5's only user, and its snapshot is about to be reused
  const auto t0 = Clock::now();
  CheckpointMeta meta = meta_of(trainer, steps_done);
  meta.val_loss = val_loss;
  if (rank_ == 0) {
    std::error_code ec;
    std::filesystem::create_directories(cfg_.checkpoint.dir, ec);
  }
  const double delay = cfg_.debug.save_write_delay_s;
  if (!cfg_.checkpoint.async_save || wait) {
    auto w = watch(watchdog_, {"checkpoint save", "world", -1, 0});
    Trace::Span span(trace_, "checkpoint save", "io");
    const IoStats st = save_checkpoint(world_, cfg_.checkpoint.dir, meta, trainer.state_to_save(), retention(), delay);
    const double seconds = seconds_since(t0);
    times_.stall_s += seconds;
    times_.sync_save_s += seconds;
    times_.any = times_.sync = true;
    own_latest_ = st.path;
    log_.message("checkpoint: saved step " + std::to_string(steps_done) + " to " + st.path + ": " + rate(st.bytes, st.seconds) +
                 by_phase(st.phases));
    remove_pruned();
    return;
  }
  {
    auto w = watch(watchdog_, {"checkpoint snapshot", "world", -1, 0});
    Trace::Span span(trace_, "checkpoint snapshot", "io");
    in_flight_.target = begin_save(world_, cfg_.checkpoint.dir, meta, retention());
    collective_check(world_, [&] { snapshot_.take(trainer.state_to_save()); });
  }
  // Gigabytes of pruned checkpoints are removed by the writer too, not while training waits.
  writer_.start([target = in_flight_.target, rank = rank_, delay, pruned = std::exchange(pruned_, {}), this] {
    for (const auto& path : pruned) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
    return write_shard_of_rank(target, rank, [this](const PieceVisitor& visit) { snapshot_.for_each(visit); }, delay);
  });
  in_flight_.active = true;
  in_flight_.snapshot_s = in_flight_.stall_s = seconds_since(t0);
  times_.stall_s += in_flight_.stall_s;
  times_.any = true;
}

void Checkpointing::poll() {
  if (!in_flight_.active) return;
  const auto t0 = Clock::now();
  if (all_ranks(world_, writer_.finished())) return publish_in_flight(t0);
  const double seconds = seconds_since(t0);
  in_flight_.stall_s += seconds;
  times_.stall_s += seconds;
}

void Checkpointing::finish() {
  if (!in_flight_.active) return;
  auto w = watch(watchdog_, {"checkpoint save (waiting for the background write)", "world", -1, 0});
  Trace::Span span(trace_, "checkpoint wait", "io");
  publish_in_flight(Clock::now());
}

void Checkpointing::finish_and_release() {
  finish();
  remove_pruned();
  snapshot_.release();
}

void Checkpointing::remove_pruned() {
  for (const auto& path : std::exchange(pruned_, {})) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
}

void Checkpointing::publish_in_flight(Clock::time_point since) {
  const ShardWrite mine = writer_.wait();
  in_flight_.active = false;
  times_.any = true;
  const auto account = [&] {
    const double seconds = seconds_since(since);
    in_flight_.stall_s += seconds;
    times_.stall_s += seconds;
  };
  IoStats st;
  try {
    st = finish_save(world_, in_flight_.target, mine, &pruned_);  // pruning costs a rename here
  } catch (const UserError&) {
    account();
    throw;
  }
  account();
  char stall[160];
  std::snprintf(stall, sizeof stall, "; training stalled %.3f s for it (snapshot %.3f s)", in_flight_.stall_s, in_flight_.snapshot_s);
  own_latest_ = st.path;
  log_.message("checkpoint: saved step " + std::to_string(in_flight_.target.meta.step) + " to " + st.path + ": " +
               rate(st.bytes, st.write_seconds) + " in the background" + stall + by_phase(st.phases));
}

CheckpointTimes Checkpointing::take_times() {
  const CheckpointTimes t = times_;
  times_ = CheckpointTimes{};
  return t;
}

}  // namespace dtrain
