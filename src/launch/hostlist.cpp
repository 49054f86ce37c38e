// Slurm hostlist expansion: comma-separated items, each with any number of [a-b,c] bracket groups.
#include "launch/hostlist.hpp"

#include <algorithm>
#include <cctype>

#include "common/error.hpp"

namespace dtrain {
namespace {

[[noreturn]] void malformed(const std::string& expr, const std::string& why) {
  throw UserError("malformed Slurm hostlist '" + expr + "': " + why);
}

// "01-04,07" -> {"01","02","03","04","07"}
std::vector<std::string> expand_ranges(const std::string& body, const std::string& expr) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const std::size_t comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    };
    if (!digits(lo) || !digits(hi)) malformed(expr, "range '" + item + "' is not N or N-M");
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a) malformed(expr, "range '" + item + "' runs backwards");
    for (long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
      out.push_back(s);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void expand_item(const std::string& item, const std::string& expr, std::vector<std::string>& out) {
  const std::size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos) malformed(expr, "']' without '['");
    out.push_back(item);
    return;
  }
  const std::size_t close = item.find(']', open);
  if (close == std::string::npos) malformed(expr, "'[' without ']'");
  const std::string prefix = item.substr(0, open);
  const std::string rest = item.substr(close + 1);
  for (const auto& v : expand_ranges(item.substr(open + 1, close - open - 1), expr))
    expand_item(prefix + v + rest, expr, out);
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expr) {
  std::vector<std::string> out;
  int depth = 0;
  std::string item;
  for (char c : expr) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) malformed(expr, "unbalanced brackets");
    if (c == ',' && depth == 0) {
      if (item.empty()) malformed(expr, "empty host name");
      expand_item(item, expr, out);
      item.clear();
    } else {
      item += c;
    }
  }
  if (depth != 0) malformed(expr, "unbalanced brackets");
  if (!item.empty()) expand_item(item, expr, out);
  return out;
}

}  // namespace dtrain
