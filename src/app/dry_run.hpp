// The --dry-run report: resolved configuration, rank layout with nodes, micro-batching, predicted
// bubble and per-rank memory. Printed by world rank 0; collective (gathers node names).
#pragma once
#include <mpi.h>

#include "config/options.hpp"
#include "plan/training_plan.hpp"
#include "runtime/launch_env.hpp"

namespace dtrain {

void print_dry_run(MPI_Comm world, const OptionTable& table, const Config& cfg, const TrainingPlan& plan,
                   const LaunchEnv& env);

}  // namespace dtrain
