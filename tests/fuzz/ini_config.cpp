// Fuzz target: an input file and its command-line overrides, as every rank of dtrain parses them
// (load_config, then validate_config). Input: the INI text, then optionally "\n#dtrain-fuzz-overrides\n"
// and one override per line ("--section.key=value").
#include "config/load.hpp"
#include "config/validate.hpp"
#include "fuzz/fuzz_target.hpp"

DTRAIN_FUZZ_TARGET(ini_config) {
  const auto parts = dtrain::fuzz::split(data, size, "\n#dtrain-fuzz-overrides\n", 2);
  std::vector<std::string> overrides;
  std::string_view rest = parts[1];
  while (!rest.empty() && overrides.size() < 64) {
    const std::size_t nl = rest.find('\n');
    overrides.emplace_back(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
  const dtrain::Config cfg = dtrain::load_config(std::string(parts[0]), "fuzz.ini", overrides);
  dtrain::validate_config(cfg);
}
