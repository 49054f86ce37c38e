// After the step loop: the final fp32 weights (model-final.h5, for `dtrain generate`) and a text sample
// of the trained model in the log.
#pragma once
#include <string>

#include "comm/host_comm.hpp"
#include "comm/parallel_state.hpp"
#include "config/config.hpp"
#include "plan/training_plan.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/step_log.hpp"
#include "train/trainer.hpp"

namespace dtrain {

// Collective over world. Rank 0 writes checkpoint.dir/model-final.h5 (nothing without a
// checkpoint.dir) one global tensor at a time, in slabs gathered from the ranks that hold them: no rank
// holds the whole model for it; logs where it went and what it did to the ranks' peak memory.
void write_final_weights(HostComm world, const ParallelState& ps, const Config& cfg, Trainer& trainer, StepLog& log,
                         const std::string& tokenizer_id, const std::string& config_text);

// Collective over ps's world. logging.sample_tokens tokens generated on rank 0 (tokenizer: rank 0's, null
// elsewhere) from a copy of the whole model with a micro-batch of one sample (the training model would
// run its whole micro-batch for every generated token), where the copy fits in what a rank may use
// beside rank 0's training state; said so when it does not.
void log_text_sample(const ParallelState& ps, const Config& cfg, const TrainingPlan& plan, Trainer& trainer, StepLog& log,
                     Tokenizer* tokenizer, kernels::Backend backend);

}  // namespace dtrain
