// The two commands that need a model: training and text generation.
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

#include "config/options.hpp"
#include "parallel/training_plan.hpp"
#include "runtime/launch_env.hpp"

namespace dtrain {

int run_train(MPI_Comm world, const OptionTable& table, const Config& cfg, const TrainingPlan& plan, const LaunchEnv& env);
int run_generate(MPI_Comm world, const Config& cfg, const LaunchEnv& env, const std::vector<std::string>& options);

}  // namespace dtrain
