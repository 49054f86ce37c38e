// The text of a Boost.ProgramOptions error, as dtrain's messages show it: with ini_keys, options named
// as the INI key ("model.hidden_size", not "--model.hidden_size"); and the user's own text never taken for one of
// Boost's placeholders. Boost 1.74's what() replaces each placeholder ("%value%", "%invalid_line%",
// "%canonical_option%", ...) until none is left, so a value or a malformed line holding one made
// dtrain loop for ever at start-up (found by fuzzing the cluster description parser).
#pragma once
#include <boost/program_options/errors.hpp>
#include <string>

namespace dtrain {

std::string program_options_error(const boost::program_options::error& e, bool ini_keys);

}  // namespace dtrain
