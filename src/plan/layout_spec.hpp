// `dtrain plan --layout`: one search point written as comma-separated key=value pairs
// ("tp=2,pp=2,dp=1,cp=1,ep=1,v=1,mb=4,recompute=none,zero=0,sp=1"): the ParallelLayout keys
// (config/parallel_layout.hpp, its one parser) plus the planner's mb, recompute and sp. Keys left out
// keep the base layout's value. Pure: text in, Layout out.
#pragma once
#include <string>

#include "plan/cost_model.hpp"

namespace dtrain {

// UserError naming the bad item and the accepted keys.
Layout parse_layout(const std::string& text, const Layout& base);

}  // namespace dtrain
