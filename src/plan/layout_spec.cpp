// parse_layout: key=value items over a base layout.
#include "plan/layout_spec.hpp"

#include <sstream>

#include "common/error.hpp"

namespace dtrain {
namespace {

const char* const kKeys = "tp, pp, dp, cp, ep, v, mb (>= 1), recompute (none|selective|full), zero (0-3), sp (0|1)";

int positive(const std::string& text, const std::string& item, int lowest) {
  if (const auto v = whole_number(text, lowest)) return *v;
  throw UserError("dtrain plan: --layout item '" + item + "' needs a whole number >= " + std::to_string(lowest) +
                  " (keys: " + kKeys + ")");
}

}  // namespace

Layout parse_layout(const std::string& text, const Layout& base) {
  Layout l = base;
  std::stringstream items(text);
  bool any = false;
  for (std::string item; std::getline(items, item, ',');) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || value.empty())
      throw UserError("dtrain plan: --layout item '" + item + "' must be key=value (keys: " + kKeys + ")");
    any = true;
    if (key == "tp") l.sizes.tp = positive(value, item, 1);
    else if (key == "pp") l.sizes.pp = positive(value, item, 1);
    else if (key == "dp") l.sizes.dp = positive(value, item, 1);
    else if (key == "cp") l.sizes.cp = positive(value, item, 1);
    else if (key == "ep") l.ep = positive(value, item, 1);
    else if (key == "v") l.v = positive(value, item, 1);
    else if (key == "mb") l.micro_batch = positive(value, item, 1);
    else if (key == "sp") l.sequence_parallel = positive(value, item, 0) > 0;
    else if (key == "zero") {
      const int z = positive(value, item, 0);
      if (z > 3) throw UserError("dtrain plan: --layout item '" + item + "': zero must be 0 (no distributed optimizer) to 3");
      l.distributed_optimizer = z > 0;
      l.zero_stage = z > 0 ? z : 1;
    } else if (key == "recompute") {
      if (value == "none") l.recompute = RecomputeGranularity::none;
      else if (value == "selective") l.recompute = RecomputeGranularity::selective;
      else if (value == "full") l.recompute = RecomputeGranularity::full;
      else throw UserError("dtrain plan: --layout item '" + item + "': recompute must be none, selective or full");
    } else {
      throw UserError("dtrain plan: --layout has an unknown key '" + key + "' (keys: " + kKeys + ")");
    }
  }
  if (!any) throw UserError(std::string("dtrain plan: --layout is empty; give key=value pairs (keys: ") + kKeys + ")");
  l.sequence_parallel = l.sequence_parallel && l.sizes.tp > 1;
  return l;
}

std::optional<int> whole_number(const std::string& text, int lowest) {
  std::size_t used = 0;
  long v = 0;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || v < lowest || v > (1L << 24)) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace dtrain
