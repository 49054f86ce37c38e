// ParallelLayout's text form (one printer, one parser) and its link to the configuration's keys.
#include "config/parallel_layout.hpp"

#include <sstream>

#include "common/error.hpp"
#include "config/config.hpp"

namespace dtrain {

const char* axis_name(Axis a) {
  switch (a) {
    case Axis::tp: return "tp";
    case Axis::cp: return "cp";
    case Axis::dp: return "dp";
    case Axis::pp: return "pp";
  }
  return "?";
}

int& Coords::operator[](Axis a) {
  switch (a) {
    case Axis::tp: return tp;
    case Axis::cp: return cp;
    case Axis::dp: return dp;
    default: return pp;
  }
}
int Coords::operator[](Axis a) const { return const_cast<Coords&>(*this)[a]; }

int ParallelLayout::operator[](Axis a) const {
  switch (a) {
    case Axis::tp: return tp;
    case Axis::cp: return cp;
    case Axis::dp: return dp;
    default: return pp;
  }
}

std::string to_string(const ParallelLayout& l, char separator) {
  std::string s;
  for (const auto& [key, value] : {std::pair<const char*, int>{"tp", l.tp}, {"cp", l.cp}, {"pp", l.pp}, {"dp", l.dp},
                                   {"ep", l.ep}, {"v", l.v}, {"zero", l.zero}}) {
    if (!s.empty()) s += separator;
    s += std::string(key) + "=" + std::to_string(value);
  }
  return s;
}

ParallelLayout parse_layout(const std::string& text, const ParallelLayout& base, const std::string& what, const std::string& keys,
                            const ExtraLayoutKey& extra) {
  ParallelLayout l = base;
  const std::string hint = " (keys: " + keys + ")";
  auto number = [&](const std::string& value, const std::string& item, int lowest) { return layout_number(value, item, lowest, what, keys); };
  std::stringstream items(text);
  bool any = false;
  for (std::string item; std::getline(items, item, ',');) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || value.empty()) throw UserError(what + ": item '" + item + "' must be key=value" + hint);
    any = true;
    if (key == "tp") l.tp = number(value, item, 1);
    else if (key == "cp") l.cp = number(value, item, 1);
    else if (key == "pp") l.pp = number(value, item, 1);
    else if (key == "dp") l.dp = number(value, item, 1);
    else if (key == "ep") l.ep = number(value, item, 1);
    else if (key == "v") l.v = number(value, item, 1);
    else if (key == "zero") {
      l.zero = number(value, item, 0);
      if (l.zero > 3) throw UserError(what + ": item '" + item + "': zero must be 0 (no distributed optimizer) to 3");
    } else if (!extra || !extra(key, value, item)) {
      throw UserError(what + ": unknown key '" + key + "'" + hint);
    }
  }
  if (!any) throw UserError(what + " is empty; give key=value pairs" + hint);
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

int layout_number(const std::string& value, const std::string& item, int lowest, const std::string& what, const std::string& keys) {
  if (const auto v = whole_number(value, lowest)) return *v;
  throw UserError(what + ": item '" + item + "' needs a whole number >= " + std::to_string(lowest) + " (keys: " + keys + ")");
}

ParallelLayout parallel_layout(const SystemConfig& system, int world) {
  ParallelLayout l;
  l.tp = system.tensor_model_parallel_size;
  l.cp = system.context_parallel_size;
  l.pp = system.pipeline_model_parallel_size;
  const long grid = static_cast<long>(l.tp) * l.cp * l.pp;
  l.dp = grid > 0 ? static_cast<int>(world / grid) : 1;
  l.ep = system.expert_model_parallel_size;
  l.v = system.virtual_pipeline_model_parallel_size;
  l.zero = system.use_distributed_optimizer ? system.zero_stage : 0;
  return l;
}

void set_parallel_layout(SystemConfig& system, const ParallelLayout& l) {
  system.tensor_model_parallel_size = l.tp;
  system.context_parallel_size = l.cp;
  system.pipeline_model_parallel_size = l.pp;
  system.expert_model_parallel_size = l.ep;
  system.virtual_pipeline_model_parallel_size = l.v;
  system.use_distributed_optimizer = l.zero > 0;
  system.zero_stage = l.zero > 0 ? l.zero : 1;
}

}  // namespace dtrain
