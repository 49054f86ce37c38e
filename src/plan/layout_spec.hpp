// `dtrain plan --layout`: one layout written as comma-separated key=value pairs
// ("tp=2,pp=2,dp=1,cp=1,ep=1,v=1,mb=4,recompute=none,zero=0,sp=1"). Keys left out keep the base
// layout's value; zero=0 means no distributed optimizer, 1-3 the distributed optimizer at that ZeRO
// stage. Pure: text in, Layout out.
#pragma once
#include <optional>
#include <string>

#include "plan/cost_model.hpp"

namespace dtrain {

// UserError naming the bad item and the accepted keys.
Layout parse_layout(const std::string& text, const Layout& base);

// The whole of `text` as a number in [lowest, 2^24] (the planner's sizes and counts); empty otherwise.
std::optional<int> whole_number(const std::string& text, int lowest);

}  // namespace dtrain
