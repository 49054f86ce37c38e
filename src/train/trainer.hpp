// Trainer: one rank's share of training on any (tp, pp, dp) layout. Owns the model chunks of its
// stage (built from its rank plan), the pipeline executor, gradient synchronisation, the optimizer,
// the data files and the step's micro-batches; runs an optimizer step over the global batch and
// validation. Every layout processes the same global samples (chosen by seed and step) and starts
// from the same global weights.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/global_slabs.hpp"
#include "common/error.hpp"
#include "config/config.hpp"
#include "data/data_blend.hpp"
#include "data/sample_reader.hpp"
#include "kernels/kernels.hpp"
#include "model/gpt.hpp"
#include "optim/adamw.hpp"
#include "optim/loss_scaler.hpp"
#include "parallel/expert_dispatch.hpp"
#include "parallel/grad_sync.hpp"
#include "parallel/pipeline_executor.hpp"
#include "parallel/sharded_params.hpp"
#include "parallel/tensor_parallel.hpp"
#include "plan/training_plan.hpp"
#include "comm/parallel_state.hpp"
#include "train/model_stage.hpp"
#include "train/step_batches.hpp"

namespace dtrain {

// What a step's read-back gives (Trainer::settle): its loss and gradient norm, summed over the ranks.
struct StepLoss {
  int step = 0;            // 0-based
  double loss = 0.0;       // mean token loss over the global batch's counted targets
  double grad_norm = 0.0;  // before clipping, every parameter counted once
};

// What the host knows of a step when train_step returns (the loss and norm come with settle).
struct StepResult {
  double lr = 0.0;
  double bubble = 0.0;     // measured: mean over stages of the fraction of the step spent waiting
  double all_to_all_s = 0.0;  // expert parallelism: mean over ranks of the seconds in the token all-to-alls
  // MoE models: the load-balancing loss added to the objective (the sum over MoE layers, averaged over
  // the step's micro-batches like the LM loss) and the tokens routed to each expert before dropping
  // ((num_layers, E), summed over the global batch); empty tokens without MoE.
  double moe_aux = 0.0;
  std::vector<double> moe_tokens;
  // fp16 runs (read back at every step): the loss scale after this step's update of it (what the next
  // step uses), and whether the step's gradients overflowed, so that its optimizer update was skipped. 0
  // and false otherwise.
  double loss_scale = 0.0;
  bool skipped = false;
  // The step's batch is skipped (training.iterations_to_skip, or a rollback's bad step): nothing ran,
  // no update; the other fields are zero.
  bool batch_skipped = false;
};


class Trainer {
 public:
  // Collective: opens the data files on every rank (a problem on any rank is a UserError on all). The
  // validation file is opened only when training.eval_interval > 0; token files must have been made
  // with `tokenizer` (the identity of data.tokenizer), whose end-of-document token `eod` (if any) ends
  // the documents packed in samples. Computes on the device of `backend` in cfg.system.precision.
  Trainer(const Config& cfg, const TrainingPlan& plan, const ParallelState& ps, kernels::Backend backend,
          const std::string& tokenizer, std::optional<int> eod = std::nullopt);

  // One step (0-based). Its loss and gradient norm stay on the device, summed over the ranks there, and
  // the update takes its clipping factor from them there (step_factor; a non-finite loss or norm skips
  // the update): the host does not wait for the step. settle() reads them back.
  StepResult train_step(int step);
  // Collective: the loss and gradient norm of every step trained since the last settle, in order, read
  // back in one copy (the run's one wait for the device in those steps). Throws NonFiniteStep, naming
  // the first step whose loss or norm is not finite (its update was skipped; the later ones were not and
  // are dropped with the run, or with a rollback, before anything is saved). fp16 runs (the loss scaler
  // needs each step's overflow) and an offloaded optimizer (its update runs on the host) read back every
  // step inside train_step; so does any run whose training.log_interval steps' sums would exceed
  // kMaxPendingSteps (settle still returns them).
  std::vector<StepLoss> settle();
  static constexpr int kMaxPendingSteps = 64;
  double evaluate();  // mean validation loss of the counted targets of training.eval_iters global batches (settles first)
  // The pipeline bubble the current order predicts: the plan's, or after zbv's re-planning from its
  // second step's measured times (train/schedule_tuning) the new order's at those times.
  double predicted_bubble() const { return predicted_bubble_; }
  // What that re-planning found, once, for the log (empty otherwise).
  std::string take_schedule_message() { return std::exchange(schedule_message_, std::string()); }
  // What the training samples carry beyond tokens ("" for plain windows), for the start-up log.
  std::string sample_description() const { return train_reader_.describe(); }
  GptModel& model() { return *model_; }
  const RankPlan& rank_plan() const { return model_->plan(); }
  Watchdog* watchdog() const { return ps_.watchdog(); }
  // The host threads an offloaded optimizer updates with (the rank's cores: its BLAS threads).
  void set_optimizer_threads(int threads) { adamw_.set_host_threads(threads); }
  Trace* trace() const { return ps_.trace(); }
  // Collective, at the end of training: the global fp32 weights (the master weights of a bf16 run), one
  // global tensor after another in bounded slabs, handed to `sink` on world rank 0
  // (ckpt/global_slabs.hpp). No rank holds more than a slab or two beyond its own state: on the host
  // the gradients arena, no longer needed, is the scratch (its values are overwritten).
  void gather_full_model(const SlabSink& sink);
  // The same into `whole` on world rank 0 (arena order of whole_model_plan(), null on the other ranks).
  void gather_full_model(float* whole);
  // The state a checkpoint saves (fp32, host memory; the plan says who writes what), copied from the
  // device when it lives there.
  RankState state_to_save();
  // Host buffers for a checkpoint to fill (load_rank_state), then load_state() to take them in; moments
  // set to null keep the optimizer's own (a fresh start from a weights file).
  RankState state_to_load();
  void load_state(const RankState& filled);
  // Optimizer updates skipped so far (fp16 overflows): the learning-rate schedule and AdamW's step count
  // follow the updates taken (steps - skipped), as Megatron's. Saved in checkpoints with the scaler.
  std::int64_t skipped_steps() const { return skipped_steps_; }
  void set_skipped_steps(std::int64_t n) { skipped_steps_ = n; }
  // The 1-based steps whose batches are consumed without running (training.iterations_to_skip, the
  // rollbacks' bad steps); each counts as a skipped update.
  const std::set<std::int64_t>& skipped_batches() const { return skipped_batches_; }
  void skip_batch(std::int64_t step) { skipped_batches_.insert(step); }
  // Early stopping's record of the validations so far: the lowest loss, its step, and the validations
  // since without a lower one. Saved in checkpoints, so a resume or a rollback goes on from it.
  struct Validations {
    std::optional<double> best;
    int best_step = 0, stale = 0;
  };
  Validations& validations() { return validations_; }
  // After a step that threw (a rollback follows): the gathered parameter buckets and the optimizer's
  // early copies are dropped, so that nothing of the step outlives it.
  void abandon_step();
  // fp16 runs: the loss scaler (null in fp32 and bf16 runs).
  LossScaler* loss_scaler() { return scaler_ ? &*scaler_ : nullptr; }

 private:
  // The rank's micro-batches of `step` of a data stream into pending slot `slot` of batches_ and the
  // device; returns the global batch's counted targets (summed over the data-parallel ranks when the
  // samples have a loss mask, else global_batch x seq_length).
  double load_batches(const SampleReader& reader, const std::string& stream, std::uint64_t step, std::size_t slot, bool queued);
  // The pending steps' sums, read back in one copy into settled_ (NonFiniteStep as settle() says).
  void read_pending();
  // The step's two sums (device memory) summed over every rank, on the device: over tp, cp, dp and pp
  // in turn (the world is their product; NCCL groups need no host staging).
  void sum_over_world_on_device(double* sums);
  double sum_over_world(double v) const;
  // The arena runs [lo, hi) of the gradients this rank counts (each element on one rank only), and
  // their squared norm added to *sum (device memory).
  void for_each_counted_run(const std::function<void(std::size_t, std::size_t)>& visit) const;
  void add_counted_sum_squares(double* sum);
  // debug.nonfinite_grad_at_step: inf into the first gradient element world rank 0 counts.
  void inject_nonfinite_gradient();
  // The initial weights of the ranges the rank keeps, a bounded piece at a time (no full-size copy).
  void init_weights(std::uint64_t seed);
  // New values for the parameter ranges the rank keeps: write(range) sets them in the arena, range by
  // range (ZeRO-3: bucket slice by bucket slice; with parameter offload each then goes to host memory,
  // so the device holds one slice at a time).
  void write_kept_parameters(const std::function<void(const ArenaRange&)>& write);
  // Host views of the state (the arenas themselves on the host, else staged copies).
  RankState host_state();

  const Config& cfg_;
  TrainingPlan plan_;
  const ParallelState& ps_;
  const kernels::KernelTable<float>& k32_;  // fp32 vector kernels (norms, clipping) of the device
  // Opened before the model is built, so bad data fails fast, before any large allocation.
  std::unique_ptr<DataBlend> train_data_, val_data_;
  SampleReader train_reader_;
  std::optional<SampleReader> val_reader_;
  TensorParallel tp_;
  std::unique_ptr<ExpertDispatch> dispatch_;  // expert parallelism (ep > 1): tokens to their experts' ranks
  std::unique_ptr<GptModel> model_;
  GradSync grad_sync_;
  std::unique_ptr<ShardedParams> sharded_;  // ZeRO-3 only
  AdamW adamw_;
  std::optional<LossScaler> scaler_;  // fp16 runs only
  std::int64_t skipped_steps_ = 0;
  std::set<std::int64_t> skipped_batches_;
  Validations validations_;
  // Steps trained and not read back: their sums are in sums_ (slot = position), at most window_ of them.
  // deferred_: only settle() and a full window read them; else every step is read back as it ends.
  struct PendingStep {
    int step;
    double loss_scale;
    double tokens;  // the global batch's counted targets: the loss's denominator
  };
  bool deferred_;
  int window_;
  std::vector<PendingStep> pending_;
  std::vector<StepLoss> settled_;  // read back, not yet returned by settle()
  StepBatches batches_;
  Arena sums_;    // (window_, 2) doubles on the device: each pending step's summed token loss and squared gradient norm
  Arena factor_;  // (1) float on the device: the step's gradient factor (step_factor), which its update reads
  // Host copies of the state for checkpoints on a GPU (fp32 views of bf16 weights on any device).
  PinnedBuffer staged_params_, staged_master_, staged_moments_[2];
  ModelStage stage_;
  PipelineExecutor train_exec_, eval_exec_;
  int steps_run_ = 0;  // steps this process has run (zbv times its second)
  double predicted_bubble_;
  std::string schedule_message_;
  // zbv: the executor's order again from the timed step's measured times (schedule_tuning).
  void replan_zbv(const PipelineStepStats& timed);
};

}  // namespace dtrain
