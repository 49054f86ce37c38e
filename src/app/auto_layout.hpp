// system.layout = auto: the layout a job runs on, chosen at start-up by the planner (plan/layout_search)
// for the job's ranks and nodes on system.cluster_file's description, the model and global batch fixed.
// Layout keys given on the command line still hold: the choice is the fastest predicted layout that
// agrees with them.
#pragma once
#include <string>

#include "app/command_line.hpp"
#include "comm/host_comm.hpp"
#include "config/config.hpp"
#include "launch/launch_env.hpp"

namespace dtrain {

// Collective: the configuration with the chosen layout's keys (ini and cl as the job loaded them).
// Rank 0 plans and prints the choice and its prediction; a UserError on every rank when no layout fits
// or none agrees with the command line.
Config choose_layout(HostComm world, const LaunchEnv& env, const std::string& ini, const CommandLine& cl, const Config& cfg);

}  // namespace dtrain
