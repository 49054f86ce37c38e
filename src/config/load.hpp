// From argv and an INI text to a Config: command-line parsing, INI parsing, unknown-key reporting.
// Pure (no MPI): main() broadcasts the INI text so that every rank parses the same bytes.
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

struct CommandLine {
  std::string command;                 // "train" (default) or "generate"
  std::string input;                   // path of input.ini
  bool help = false;
  bool version = false;
  bool dry_run = false;
  std::vector<std::string> overrides;  // "--section.key=value" arguments, in order
  std::vector<std::string> extra;      // sub-command options (generate: --checkpoint, --tokens, ...)
};

// Splits argv into the input file, flags and key overrides. Throws UserError on misuse.
CommandLine parse_command_line(int argc, const char* const* argv);

// Parses the INI text and the overrides into a Config (overrides win). Throws UserError naming every
// unknown key at once (with a did-you-mean) or the key whose value has the wrong type.
Config load_config(const std::string& ini_text, const std::string& ini_name,
                   const std::vector<std::string>& overrides);

// Closest known key to an unknown one ("" when nothing is close).
std::string did_you_mean(const std::string& unknown, const std::vector<std::string>& known);

}  // namespace dtrain
