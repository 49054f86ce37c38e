// Trainer: one rank's share of training on any (tp, pp, dp) layout. Owns the model chunks of its
// stage, the pipeline executor, gradient synchronisation, the optimizer and the data files; runs an
// optimizer step over the global batch and validation. Every layout processes the same global
// samples (chosen by seed and step) and starts from the same global weights.
#pragma once
#include <memory>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "config/config.hpp"
#include "data/token_file.hpp"
#include "kernels/kernels.hpp"
#include "model/gpt.hpp"
#include "optim/adamw.hpp"
#include "parallel/grad_sync.hpp"
#include "parallel/pipeline_executor.hpp"
#include "parallel/tensor_parallel.hpp"
#include "parallel/training_plan.hpp"
#include "runtime/parallel_state.hpp"

namespace dtrain {

struct StepResult {
  double loss = 0.0;       // mean token loss over the global batch
  double grad_norm = 0.0;  // before clipping, every parameter counted once
  double lr = 0.0;
  double bubble = 0.0;     // measured: mean over stages of the fraction of the step spent waiting
};

class Trainer {
 public:
  // Collective: opens the data files on every rank (a problem on any rank is a UserError on all).
  Trainer(const Config& cfg, const TrainingPlan& plan, const ParallelState& ps, const kernels::KernelTable& k);

  StepResult train_step(int step);  // 0-based step
  double evaluate();                // mean validation loss over training.eval_iters global batches
  GptModel& model() { return model_; }
  Watchdog* watchdog() const { return ps_.watchdog(); }
  Trace* trace() const { return ps_.trace(); }
  // True when this rank is the one that counts tensor t among the global weights (replicas and the
  // tied embedding's second copy excluded; data-parallel rank 0 only).
  bool owns_globally(const TensorSpec& t) const { return ps_.coords().dp == 0 && grad_sync_.counts_for_norm(t); }
  // Collective: assembles the global weights on world rank 0 into `full`, an unsharded model of the
  // same configuration (null on the other ranks).
  void gather_full_model(GptModel* full);
  // The state a checkpoint saves and restores (parameters, optimizer moments and who writes what).
  RankState rank_state();
  // After a checkpoint load: parameters of every rank are complete; nothing else to rebuild.

 private:
  // Loads global samples of micro-batch `mb` of `step` of a stream into an activation slot.
  void load(const TokenFile& file, const std::string& stream, std::uint64_t step, int slot, int mb);
  double sum_over_world(double v) const;

  const Config& cfg_;
  TrainingPlan plan_;
  const ParallelState& ps_;
  const kernels::KernelTable& k_;
  // Opened before the model is built, so bad data fails fast, before any large allocation.
  std::unique_ptr<TokenFile> train_data_, val_data_;
  TensorParallel tp_;
  StageActions actions_;
  GptModel model_;
  GradSync grad_sync_;
  AdamW adamw_;
  PipelineExecutor train_exec_, eval_exec_;
};

}  // namespace dtrain
