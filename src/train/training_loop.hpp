// The training run of `dtrain INPUT.ini`: set-up on the plan, resume, the step loop with logging,
// validation, preemption stops and periodic checkpoints, then the final weights and a text sample.
#pragma once
#include <string>

#include "comm/host_comm.hpp"
#include "config/config.hpp"
#include "launch/launch_env.hpp"
#include "launch/placement.hpp"
#include "plan/training_plan.hpp"
#include "runtime/stop_signal.hpp"

namespace dtrain {

// Collective over world. config_text is the resolved input file (stored in checkpoints). Returns the
// process exit code: 0 when training is complete, kPreemptedExit after a stop signal. `startup` is
// done once the ranks agreed, before the first step, whether a stop signal came during start-up.
int run_training(HostComm world, const Config& cfg, const TrainingPlan& plan, const LaunchEnv& env, const Placement& placement,
                 const std::string& config_text, StartupStop& startup);

}  // namespace dtrain
