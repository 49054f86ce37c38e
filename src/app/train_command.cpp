// Placeholder until the trainer lands: training and generation are not available yet.
#include "app/train_command.hpp"

#include "common/error.hpp"

namespace dtrain {

int run_train(MPI_Comm, const OptionTable&, const Config&, const TrainingPlan&, const LaunchEnv&) {
  throw UserError("training is not available in this build yet; use --dry-run");
}

int run_generate(MPI_Comm, const Config&, const LaunchEnv&, const std::vector<std::string>&) {
  throw UserError("generation is not available in this build yet");
}

}  // namespace dtrain
