// Command-line parsing for every dtrain program (dtrain, dtrain generate, ckpt-consolidate,
// dtrain-data): Boost.ProgramOptions with the program's options, its positional arguments, and one
// way of turning a parse error into a UserError that names the option and points to --help.
#pragma once
#include <boost/program_options.hpp>

#include <string>

namespace dtrain {

// Parses argv[first..argc) against `options` (+ `positional`) into the options' targets and returns
// the values. Errors (an unknown option, a value of the wrong type) name the option and end with
// "see '<program> --help'".
boost::program_options::variables_map parse_command_line_options(
    int argc, const char* const* argv, int first, const boost::program_options::options_description& options,
    const boost::program_options::positional_options_description& positional, const std::string& program);

// main() of a tool without MPI: runs run(argc, argv); a UserError prints "<program>: error: ..." and
// exits 2, any other exception exits 1 the same way.
int run_tool(const char* program, int argc, char** argv, int (*run)(int, char**));

}  // namespace dtrain
