// dtrain's command line: `dtrain [--dry-run] INPUT.ini [--section.key=value ...]`,
// `dtrain generate INPUT.ini [--weights FILE] [--prompt TEXT] ...`, `dtrain plan INPUT.ini --cluster FILE ...`,
// `dtrain calibrate --out FILE`, `--help`, `--version`.
// Parsed with Boost.ProgramOptions; input keys may be given as --section.key=value or
// --section.key value and are checked against the options table when the input file is loaded.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace dtrain {

struct GenerateOptions {
  std::string weights;  // default: checkpoint.dir/model-final.h5
  std::string prompt = "\n";
  bool prompt_given = false;
  int tokens = 400;
  std::string prompts_file;  // one prompt a line: a batch generated together
  double temperature = 0.8;
  int top_k = 0;
  double top_p = 1.0;
  bool no_cache = false;  // every token a forward pass over the whole context (the cache's reference)
  std::optional<std::uint64_t> seed;  // default: training.seed
};

struct PlanOptions {
  std::string cluster;   // a cluster description (inputs/clusters/)
  int nodes = 0;         // 0 = the description's
  int top = 5;
  std::string scaling;   // device counts "8,64,512" for the scaling curves
  bool plot = false;
  std::string layout;    // "tp=2,pp=2,mb=4,...": cost this one layout instead of searching
};

struct CalibrateOptions {
  std::string out;       // the cluster description to write
  std::string name;      // its name (default: the host name)
  bool quick = false;    // fewer sizes, shorter timings (tests)
  ComputeDevice device = ComputeDevice::cpu;  // what to measure: the host, or a GPU per rank
};

struct CommandLine {
  enum class Command { train, generate, plan, calibrate } command = Command::train;
  bool help = false, version = false, dry_run = false;
  std::string input;                   // path of input.ini
  std::vector<std::string> overrides;  // "--section.key=value", in order
  GenerateOptions generate;
  PlanOptions plan;
  CalibrateOptions calibrate;
};

// Throws UserError naming the option and pointing to --help.
CommandLine parse_dtrain_command_line(int argc, const char* const* argv);

// The --help text of the command (`dtrain`, `dtrain generate`, `dtrain plan` or `dtrain calibrate`), without the input-key list.
std::string command_usage(CommandLine::Command command);

}  // namespace dtrain
