// hf_model_overrides: the model of checkpoint.init_from=hf:DIR from its config.json.
#include "app/hf_model_keys.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "hf/hf_model.hpp"

namespace dtrain {

std::vector<std::string> hf_model_overrides(HostComm world, const Config& cfg, const std::vector<std::string>& given) {
  const std::string prefix = "hf:";
  if (cfg.checkpoint.init_from.rfind(prefix, 0) != 0) return {};
  const std::string what = "checkpoint.init_from=" + cfg.checkpoint.init_from;
  const std::string path = cfg.checkpoint.init_from.substr(prefix.size()) + "/config.json";
  std::string text;
  int ok = 1;
  if (world.rank() == 0) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream os;
    if (in) {
      os << in.rdbuf();
      text = os.str();
    } else {
      ok = 0;
      text = what + ": cannot read '" + path + "' (" + std::strerror(errno) + "); give a Hugging Face model directory";
    }
  }
  broadcast(world, &ok, 1, 0);
  broadcast_string(world, text);
  if (!ok) throw UserError(text);
  Config hf;
  try {
    hf = config_from_hf(text, path).cfg;
  } catch (const UserError& e) {
    throw UserError(what + ": " + e.what());
  }
  const bool rope = hf.model.position_embedding_type == PositionEmbedding::rope;
  const auto is_given = [&](const std::string& key) { return std::find(given.begin(), given.end(), key) != given.end(); };
  std::vector<std::pair<std::string, std::string>> mine;
  for (const auto& kv : model_keys(cfg)) mine.push_back(kv);
  std::vector<std::string> taken, added, differ;
  for (const auto& [key, value] : model_keys(hf)) {
    if (rope && key == "model.seq_length") continue;  // the run's context; RoPE's tensors do not depend on it
    if (!is_given(key)) {
      added.push_back("--" + key + "=" + value);
      taken.push_back(key.substr(6) + "=" + value);
      continue;
    }
    const auto own = std::find_if(mine.begin(), mine.end(), [&](const auto& kv) { return kv.first == key; });
    const std::string have = own == mine.end() ? "(unused)" : own->second;
    if (have != value) differ.push_back(key + " = " + have + " in the input, " + value + " in config.json");
  }
  if (!differ.empty()) {
    std::string msg = what + ": the input's [model] keys describe another model than '" + path + "':";
    for (const auto& d : differ) msg += "\n  " + d;
    msg += "\nleave them out of the input (they are taken from config.json) or give config.json's values";
    throw UserError(msg);
  }
  if (!taken.empty() && world.rank() == 0) {
    std::string list;
    for (const auto& t : taken) list += (list.empty() ? "" : ", ") + t;
    std::printf("model: %zu [model] key(s) from '%s': %s\n", taken.size(), path.c_str(), list.c_str());
  }
  return added;
}

}  // namespace dtrain
