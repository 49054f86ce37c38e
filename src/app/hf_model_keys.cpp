// hf_model_overrides: the model of checkpoint.init_from=hf:DIR from its config.json.
#include "app/hf_model_keys.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "comm/collective_check.hpp"
#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "hf/hf_convert.hpp"

namespace dtrain {

std::vector<std::string> hf_model_overrides(HostComm world, const Config& cfg, const std::vector<std::string>& given) {
  const std::string prefix = "hf:";
  if (cfg.checkpoint.init_from.rfind(prefix, 0) != 0) return {};
  const std::string what = "checkpoint.init_from=" + cfg.checkpoint.init_from;
  const std::string dir = cfg.checkpoint.init_from.substr(prefix.size());
  // Rank 0 reads config.json and compares; its error, or its overrides (one a line), reach every rank.
  std::string lines;
  collective_check(world, [&] {
    if (world.rank() != 0) return;
    Config hf;
    try {
      hf = read_hf_model_config(dir).cfg;
    } catch (const UserError& e) {
      throw UserError(what + ": " + e.what());
    }
    const bool rope = hf.model.position_embedding_type == PositionEmbedding::rope;
    const auto mine = model_keys(cfg);
    std::string taken, differ;
    for (const auto& [key, value] : model_keys(hf)) {
      if (rope && key == "model.seq_length") continue;  // the run's context; RoPE's tensors do not depend on it
      if (std::find(given.begin(), given.end(), key) == given.end()) {
        lines += "--" + key + "=" + value + "\n";
        taken += (taken.empty() ? "" : ", ") + key.substr(6) + "=" + value;
        continue;
      }
      const auto own = std::find_if(mine.begin(), mine.end(), [&](const auto& kv) { return kv.first == key; });
      const std::string have = own == mine.end() ? "(unused)" : own->second;
      if (have != value) differ += "\n  " + key + " = " + have + " in the input, " + value + " in config.json";
    }
    if (!differ.empty())
      throw UserError(what + ": the input's [model] keys describe another model than '" + dir + "/config.json':" + differ +
                      "\nleave them out of the input (they are taken from config.json) or give config.json's values");
    if (!taken.empty()) std::printf("model: [model] keys from '%s/config.json': %s\n", dir.c_str(), taken.c_str());
  });
  broadcast_string(world, lines);
  std::vector<std::string> overrides;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) overrides.push_back(line);
  return overrides;
}

}  // namespace dtrain
