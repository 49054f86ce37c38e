// From an INI text and command-line overrides to a Config: INI parsing, unknown-key reporting.
// Pure (no MPI): dtrain broadcasts the INI text so that every rank parses the same bytes.
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

// Parses the INI text and the overrides ("--section.key=value", in order; the last of a key wins) into
// a Config (overrides win over the file). Throws UserError naming every unknown key at once (with a
// did-you-mean), the key whose value has the wrong type, or a text with no [model] section. `given`,
// when not null, receives the name of every key the text or the overrides set ("model.num_layers").
Config load_config(const std::string& ini_text, const std::string& ini_name,
                   const std::vector<std::string>& overrides, std::vector<std::string>* given = nullptr);

// Closest known key to an unknown one ("" when nothing is close).
std::string did_you_mean(const std::string& unknown, const std::vector<std::string>& known);

}  // namespace dtrain
