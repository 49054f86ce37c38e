// When and how a training run saves and resumes: checkpoint.dir / save_interval / keep_last / load.
// load = auto resumes from <dir>/latest when present, none starts fresh, anything else is a path to a
// step directory. Resuming works on any layout; the step, data position and learning-rate schedule
// follow from the saved step (samples are chosen by seed and step). With no checkpoint to resume,
// checkpoint.init_from starts from a weights file's model (any layout, fresh optimizer, step 0).
#pragma once
#include <mpi.h>

#include <string>

#include "config/config.hpp"
#include "train/step_log.hpp"
#include "train/trainer.hpp"

namespace dtrain {

class Checkpointing {
 public:
  // tokenizer: the identity of data.tokenizer, stored in every checkpoint and required of the one resumed.
  Checkpointing(MPI_Comm world, const Config& cfg, const TrainingPlan& plan, std::string config_text, std::string tokenizer,
                StepLog& log);
  // Loads the checkpoint asked for, else the init_from weights (collective); returns the number of steps
  // already done.
  int resume(Trainer& trainer);
  bool due(int steps_done, bool last) const;
  void save(Trainer& trainer, int steps_done);  // collective

 private:
  std::string load_path() const;
  void init_from_weights(Trainer& trainer);  // collective
  // Rank 0: a warning when checkpoint.dir holds checkpoints this run does not resume from.
  void warn_about_other_checkpoints(const std::string& resume_path) const;
  MPI_Comm world_;
  const Config& cfg_;
  TrainingPlan plan_;
  std::string config_text_;
  std::string tokenizer_;  // the identity of data.tokenizer, stored in every save
  StepLog& log_;
  int rank_ = 0;
};

}  // namespace dtrain
