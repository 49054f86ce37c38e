// `dtrain plan INPUT.ini --cluster FILE`: the planner's report (plan/layout_search ranks the layouts).
#pragma once
#include <string>

#include "app/command_line.hpp"
#include "config/config.hpp"

namespace dtrain {

// Prints the fastest layouts that fit (and the scaling curves with --scaling); returns the exit code.
// UserError on a bad option or cluster file, and when no layout fits (naming the memory that would).
int run_plan(const Config& cfg, const std::string& input, const PlanOptions& options);

}  // namespace dtrain
