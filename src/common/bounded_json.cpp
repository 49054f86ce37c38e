// parse_bounded_json: nlohmann's parser with a callback that stops it past the depth bound.
#include "common/bounded_json.hpp"

namespace dtrain {
namespace {

struct TooDeep {};

}  // namespace

bool parse_bounded_json(const std::string& text, nlohmann::json& out, std::string& error) {
  if (text.size() > kMaxJsonBytes) {
    error = std::to_string(text.size()) + " bytes, more than the " + std::to_string(kMaxJsonBytes) + " a JSON file may have here";
    return false;
  }
  const auto bounded = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    return true;
  };
  try {
    out = nlohmann::json::parse(text, bounded);
  } catch (const TooDeep&) {
    out = nullptr;
    error = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return false;
  } catch (const nlohmann::json::exception& e) {
    out = nullptr;
    error = e.what();
    return false;
  }
  return true;
}

}  // namespace dtrain
