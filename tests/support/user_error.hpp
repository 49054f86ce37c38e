// Test helpers for user-facing errors: the message of the UserError a call raises, and a substring check.
#pragma once
#include <functional>
#include <string>

#include "common/error.hpp"

namespace dtrain::testing {

// The what() of the UserError that f throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace dtrain::testing
