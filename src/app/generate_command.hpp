// `dtrain generate INPUT.ini`: text sampled from a weights file by the whole model on one rank.
#pragma once
#include "app/command_line.hpp"
#include "config/config.hpp"
#include "kernels/backend.hpp"
#include "launch/launch_env.hpp"
#include "runtime/stop_signal.hpp"

namespace dtrain {

// Prints the prompt and its continuation; returns the exit code (kPreemptedExit after a stop signal,
// which ends it at the next token; `startup` is done when the first token is computed). UserError on a
// bad weights file. Runs on the device of `backend` in cfg.system.precision.
int run_generate(const Config& cfg, const LaunchEnv& env, const GenerateOptions& options, kernels::Backend backend,
                 StartupStop& startup);

}  // namespace dtrain
