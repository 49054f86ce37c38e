// program_options_error: Boost's message with the substituted values escaped first.
#include "config/po_error.hpp"

#include <map>

namespace po = boost::program_options;

namespace dtrain {
namespace {

// Reads error_with_option_name's substitutions (a protected member) through a pointer to member.
struct SubstitutionsOf : po::error_with_option_name {
  static std::map<std::string, std::string> po::error_with_option_name::*member() { return &SubstitutionsOf::m_substitutions; }
};

// '%' as "%25", so that no value holds a placeholder's "%name%".
std::string escape_percent(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '%' ? std::string("%25") : std::string(1, c);
  return out;
}

}  // namespace

std::string program_options_error(const po::error& e, bool ini_keys) {
  std::string what;
  if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&e)) {
    po::error_with_option_name safe = *named;
    for (const auto& [token, value] : named->*SubstitutionsOf::member())
      if (value.find('%') != std::string::npos) safe.set_substitute(token, escape_percent(value));
    what = safe.what();
  } else {
    what = e.what();
  }
  if (ini_keys)
    for (std::string::size_type p; (p = what.find("'--")) != std::string::npos;) what.erase(p + 1, 2);
  return what;
}

}  // namespace dtrain
