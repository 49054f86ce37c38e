// Trainer: one rank's share of training on any (tp, pp, dp) layout. Owns the model chunks of its
// stage (built from its rank plan), the pipeline executor, gradient synchronisation, the optimizer,
// the data files and the step's micro-batches; runs an optimizer step over the global batch and
// validation. Every layout processes the same global samples (chosen by seed and step) and starts
// from the same global weights.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "config/config.hpp"
#include "data/token_file.hpp"
#include "kernels/kernels.hpp"
#include "model/gpt.hpp"
#include "optim/adamw.hpp"
#include "parallel/grad_sync.hpp"
#include "parallel/pipeline_executor.hpp"
#include "parallel/tensor_parallel.hpp"
#include "plan/training_plan.hpp"
#include "comm/parallel_state.hpp"
#include "train/model_stage.hpp"

namespace dtrain {

struct StepResult {
  double loss = 0.0;       // mean token loss over the global batch
  double grad_norm = 0.0;  // before clipping, every parameter counted once
  double lr = 0.0;
  double bubble = 0.0;     // measured: mean over stages of the fraction of the step spent waiting
};

class Trainer {
 public:
  // Collective: opens the data files on every rank (a problem on any rank is a UserError on all). The
  // validation file is opened only when training.eval_interval > 0.
  Trainer(const Config& cfg, const TrainingPlan& plan, const ParallelState& ps, const kernels::KernelTable& k);

  StepResult train_step(int step);  // 0-based step
  double evaluate();                // mean validation loss over training.eval_iters global batches
  GptModel& model() { return model_; }
  const RankPlan& rank_plan() const { return model_.plan(); }
  Watchdog* watchdog() const { return ps_.watchdog(); }
  Trace* trace() const { return ps_.trace(); }
  // Collective: assembles the global weights on world rank 0 into `whole` (the parameter arena of
  // whole_model_plan(), null on the other ranks).
  void gather_full_model(float* whole);
  // The state a checkpoint saves and restores (parameters, optimizer moments; the plan says who writes what).
  RankState rank_state();

 private:
  // The rank's micro-batches of `step` of a data stream, into tokens_ and targets_.
  void load_batches(const TokenFile& file, const std::string& stream, std::uint64_t step);
  double sum_over_world(double v) const;

  const Config& cfg_;
  TrainingPlan plan_;
  const ParallelState& ps_;
  const kernels::KernelTable& k_;
  // Opened before the model is built, so bad data fails fast, before any large allocation.
  std::unique_ptr<TokenFile> train_data_, val_data_;
  TensorParallel tp_;
  GptModel model_;
  GradSync grad_sync_;
  AdamW adamw_;
  std::vector<int> tokens_, targets_;  // (m, B, T): this rank's share of the step's global batch
  ModelStage stage_;
  PipelineExecutor train_exec_, eval_exec_;
};

}  // namespace dtrain
