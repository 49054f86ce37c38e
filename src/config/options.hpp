// The options table: the single source of every input.ini key, its type, default and help text.
// INI "[section] key = v" and the command line "--section.key=v" both land in one Config.
#pragma once
#include <boost/program_options.hpp>

#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

struct OptionInfo {
  std::string name;                        // "section.key"
  std::string help;
  std::string default_text;
  std::function<std::string()> value_text; // the value now held in the Config
};

class OptionTable {
 public:
  explicit OptionTable(Config& cfg);
  const boost::program_options::options_description& description() const { return desc_; }
  const std::vector<OptionInfo>& options() const { return infos_; }
  bool has(const std::string& name) const;

 private:
  template <typename T>
  void add(const char* name, T* target, const char* help);
  boost::program_options::options_description desc_;
  std::vector<OptionInfo> infos_;
};

// "--help" text: every key grouped by section, with default and meaning.
std::string options_help(const OptionTable& table);
// The resolved configuration as INI text (also stored in checkpoints).
std::string config_as_ini(const OptionTable& table);

}  // namespace dtrain
