// parse_layout: the planner's key=value items over a base layout.
#include "plan/layout_spec.hpp"

#include "common/error.hpp"

namespace dtrain {

Layout parse_layout(const std::string& text, const Layout& base) {
  const std::string what = "dtrain plan: --layout";
  const std::string keys = "tp, pp, dp, cp, ep, v, mb (>= 1), recompute (none|selective|full), zero (0-3), sp (0|1), "
                           "first, last (blocks of the first / last pipeline stage; 0 = even), zb (0|1: zero-bubble, zb-h1 or "
                           "zbv at v=2)";
  Layout l = base;
  l.sizes = parse_layout(text, base.sizes, what, keys, [&](const std::string& key, const std::string& value, const std::string& item) {
    const auto number = [&](int lowest) { return layout_number(value, item, lowest, what, keys); };
    if (key == "mb") l.micro_batch = number(1);
    else if (key == "sp") l.sequence_parallel = number(0) > 0;
    else if (key == "first") l.first_stage_layers = number(0);
    else if (key == "last") l.last_stage_layers = number(0);
    else if (key == "zb") l.zero_bubble = number(0) > 0;
    else if (key == "recompute") {
      if (value == "none") l.recompute = RecomputeGranularity::none;
      else if (value == "selective") l.recompute = RecomputeGranularity::selective;
      else if (value == "full") l.recompute = RecomputeGranularity::full;
      else throw UserError(what + ": item '" + item + "': recompute must be none, selective or full");
    } else {
      return false;
    }
    return true;
  });
  l.sequence_parallel = l.sequence_parallel && l.sizes.tp > 1;
  return l;
}

}  // namespace dtrain
