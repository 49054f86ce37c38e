// The --dry-run report: resolved configuration, rank layout with nodes, micro-batching, predicted
// bubble and per-rank memory. Printed by world rank 0; collective (gathers node names).
#pragma once
#include "comm/host_comm.hpp"
#include "config/options.hpp"
#include "launch/launch_env.hpp"
#include "plan/training_plan.hpp"

namespace dtrain {

void print_dry_run(HostComm world, const OptionTable& table, const Config& cfg, const TrainingPlan& plan,
                   const LaunchEnv& env);

}  // namespace dtrain
