// Trainer: one rank's share of training. Owns the model, optimizer and data files; runs an optimizer
// step over the global batch (micro-batches, data-parallel gradient sum, clipping, AdamW) and
// validation. Every layout processes the same global samples (chosen by seed and step).
#pragma once
#include <memory>
#include <string>

#include "config/config.hpp"
#include "data/token_file.hpp"
#include "kernels/kernels.hpp"
#include "model/gpt.hpp"
#include "optim/adamw.hpp"
#include "parallel/training_plan.hpp"
#include "runtime/parallel_state.hpp"

namespace dtrain {

struct StepResult {
  double loss = 0.0;       // mean token loss over the global batch
  double grad_norm = 0.0;  // before clipping
  double lr = 0.0;
};

class Trainer {
 public:
  // Collective: opens the data files on every rank (a problem on any rank is a UserError on all).
  Trainer(const Config& cfg, const TrainingPlan& plan, const ParallelState& ps, const kernels::KernelTable& k);

  StepResult train_step(int step);  // 0-based step
  double evaluate();                // mean validation loss over training.eval_iters global batches
  GptModel& model() { return model_; }

 private:
  // Loads global samples [first, first + micro_batch) of `step` of a stream into activation slot 0.
  void load_micro_batch(const TokenFile& file, const std::string& stream, std::uint64_t step, std::uint64_t first);
  double sum_over(MPI_Comm comm, double v) const;

  const Config& cfg_;
  TrainingPlan plan_;
  const ParallelState& ps_;
  const kernels::KernelTable& k_;
  // Opened before the model is built, so bad data fails fast, before any large allocation.
  std::unique_ptr<TokenFile> train_data_, val_data_;
  GptModel model_;
  AdamW adamw_;
};

}  // namespace dtrain
