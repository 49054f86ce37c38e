// `dtrain generate INPUT.ini`: text sampled from a weights file by the whole model on one rank.
#pragma once
#include "app/command_line.hpp"
#include "config/config.hpp"
#include "kernels/backend.hpp"
#include "launch/launch_env.hpp"

namespace dtrain {

// Prints the prompt and its continuation; returns the exit code. UserError on a bad weights file.
// Runs on the device of `backend` in cfg.system.precision.
int run_generate(const Config& cfg, const LaunchEnv& env, const GenerateOptions& options, kernels::Backend backend);

}  // namespace dtrain
