// Command line and INI parsing through the options table; every error is a UserError naming the key.
#include "config/load.hpp"

#include <algorithm>
#include <sstream>

#include "common/error.hpp"
#include "config/options.hpp"
#include "config/po_error.hpp"

namespace po = boost::program_options;

namespace dtrain {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string key_part(const std::string& name) {
  const auto dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// The unknown keys, each with its did-you-mean: the first kMaxNamedUnknown of them, each cut to
// kMaxShownKey characters, so that a file of 100,000 unknown keys or one key of a megabyte is one short
// error, quickly (it took 7 s and 3 s, and printed all of it).
constexpr std::size_t kMaxNamedUnknown = 20, kMaxShownKey = 80;

std::string describe_unknown(const std::vector<std::string>& unknown, const std::vector<std::string>& known,
                             const std::string& where) {
  std::ostringstream os;
  os << "unknown key" << (unknown.size() > 1 ? "s" : "") << " in " << where << ":";
  const std::size_t named = std::min(unknown.size(), kMaxNamedUnknown);
  for (std::size_t i = 0; i < named; ++i) {
    const std::string& u = unknown[i];
    os << " '" << (u.size() > kMaxShownKey ? u.substr(0, kMaxShownKey) + "...' (" + std::to_string(u.size()) + " characters)" : u + "'");
    const std::string hint = did_you_mean(u, known);
    if (!hint.empty()) os << " (did you mean '" << hint << "'?)";
    os << (i + 1 == named ? "" : ",");
  }
  if (named < unknown.size()) os << " and " << unknown.size() - named << " more";
  os << "; see 'dtrain --help' for every key";
  return os.str();
}

}  // namespace

std::string did_you_mean(const std::string& unknown, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_d = std::string::npos;
  const std::size_t limit = std::max<std::size_t>(2, unknown.size() / 3);
  for (const auto& k : known) {
    // Same key under another section counts as a near-perfect match.
    if (key_part(k) == key_part(unknown)) {
      if (1 < best_d) best_d = 1, best = k;
      continue;
    }
    // The distance is at least the difference in length: past the limit, no need to compute it.
    const std::size_t longer = std::max(unknown.size(), k.size()), shorter = std::min(unknown.size(), k.size());
    if (longer - shorter > limit) continue;
    const std::size_t d = edit_distance(unknown, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best_d <= limit ? best : "";
}

namespace {

// Whether a line of `text` is `header` with only spaces and tabs around it (and a CR at its end), in
// one pass: std::regex's matcher recursed per character and a 3 MB run of spaces overflowed the stack.
bool has_section_line(const std::string& text, const std::string& header) {
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::size_t a = begin, b = end;
    if (b > a && text[b - 1] == '\r') --b;
    while (a < b && (text[a] == ' ' || text[a] == '\t')) ++a;
    while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t')) --b;
    if (text.compare(a, b - a, header) == 0) return true;
    begin = end + 1;
  }
  return false;
}

}  // namespace

Config load_config(const std::string& ini_text, const std::string& ini_name,
                   const std::vector<std::string>& overrides, std::vector<std::string>* given) {
  if (!has_section_line(ini_text, "[model]"))
    throw UserError(ini_name + " has no [model] section: it is not a dtrain input file (see inputs/tiny.ini for one)");
  Config cfg;
  OptionTable table(cfg);
  std::vector<std::string> known;
  for (const auto& o : table.options()) known.push_back(o.name);

  // Command-line overrides are stored first: po::store never replaces a value already stored.
  // "--key=value" as two tokens, so that an empty value ("--checkpoint.dir=") clears a key.
  // A key given twice on the command line: the last one wins, as users of other launchers expect.
  std::vector<std::string> args;
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    const auto eq = overrides[i].find('=');
    const std::string key = overrides[i].substr(0, eq);
    bool later = false;
    for (std::size_t j = i + 1; j < overrides.size(); ++j) later = later || overrides[j].substr(0, overrides[j].find('=')) == key;
    if (later) continue;
    args.push_back(key);
    if (eq != std::string::npos) args.push_back(overrides[i].substr(eq + 1));
  }
  po::variables_map vm;
  try {
    // No guessing: "--model.hidden" must not silently mean model.hidden_size.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    auto cmd = po::command_line_parser(args).options(table.description()).style(style).allow_unregistered().run();
    std::vector<std::string> unknown_cmd;
    for (const auto& o : cmd.options)
      if (o.unregistered) unknown_cmd.push_back(o.string_key);
    if (!unknown_cmd.empty()) throw UserError(describe_unknown(unknown_cmd, known, "the command line"));
    po::store(cmd, vm);
  } catch (const po::error& e) {
    throw UserError("the command line: " + program_options_error(e, /*ini_keys=*/true));
  }
  try {
    std::istringstream in(ini_text);
    auto ini = po::parse_config_file(in, table.description(), /*allow_unregistered=*/true);
    std::vector<std::string> unknown_ini;
    for (const auto& o : ini.options)
      if (o.unregistered) unknown_ini.push_back(o.string_key);
    if (!unknown_ini.empty()) throw UserError(describe_unknown(unknown_ini, known, ini_name));
    po::store(ini, vm);
    po::notify(vm);
  } catch (const po::invalid_config_file_syntax& e) {
    throw UserError(ini_name + ": malformed line (" + program_options_error(e, /*ini_keys=*/true) + "); expected '[section]' or 'key = value'");
  } catch (const po::multiple_occurrences& e) {
    throw UserError(ini_name + ": key '" + e.get_option_name().substr(e.get_option_name().rfind('-') + 1) +
                    "' is given twice; keep one");
  } catch (const po::error& e) {
    throw UserError(ini_name + ": " + program_options_error(e, /*ini_keys=*/true));
  }
  if (given)
    for (const auto& [name, value] : vm)
      if (!value.defaulted()) given->push_back(name);
  return cfg;
}

}  // namespace dtrain
