// parse_command_line_options: Boost.ProgramOptions, errors as UserError.
#include "config/cli.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.hpp"
#include "config/po_error.hpp"

namespace po = boost::program_options;

namespace dtrain {

po::variables_map parse_command_line_options(int argc, const char* const* argv, int first, const po::options_description& options,
                                             const po::positional_options_description& positional, const std::string& program) {
  const std::vector<std::string> args(argv + std::min(first, argc), argv + argc);
  po::variables_map values;
  try {
    // No guessing: an abbreviation must not silently mean a longer option.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(args).options(options).positional(positional).style(style).run(), values);
    po::notify(values);
  } catch (const po::error& e) {
    throw UserError(program_options_error(e, /*ini_keys=*/false) + "; see '" + program + " --help'");
  }
  return values;
}

int run_tool(const char* program, int argc, char** argv, int (*run)(int, char**)) {
  try {
    return run(argc, argv);
  } catch (const UserError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kUserErrorExit;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kFatalExit;
  }
}

}  // namespace dtrain
