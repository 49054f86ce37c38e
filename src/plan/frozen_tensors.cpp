// freeze_patterns, frozen_by and freeze_errors: training.freeze against the model's tensor names.
#include "plan/frozen_tensors.hpp"

#include <fnmatch.h>

#include <algorithm>

#include "plan/tensor_table.hpp"

namespace dtrain {

std::vector<std::string> freeze_patterns(const std::string& freeze) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= freeze.size()) {
    const std::size_t comma = std::min(freeze.find(',', at), freeze.size());
    std::string piece = freeze.substr(at, comma - at);
    const auto first = piece.find_first_not_of(" \t"), last = piece.find_last_not_of(" \t");
    if (first != std::string::npos) out.push_back(piece.substr(first, last - first + 1));
    at = comma + 1;
  }
  return out;
}

bool frozen_by(const std::vector<std::string>& patterns, const std::string& name) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return fnmatch(p.c_str(), name.c_str(), 0) == 0; });
}

std::vector<std::string> freeze_errors(const Config& cfg) {
  const std::vector<std::string> patterns = freeze_patterns(cfg.training.freeze);
  if (patterns.empty()) return {};
  std::vector<std::string> errs;
  ModelShape shape = ModelShape::from(cfg);
  shape.frozen.clear();  // the names alone: a table that places nothing apart
  StagePart whole{{{}}, true, true};
  for (int l = 0; l < cfg.model.num_layers; ++l) whole.chunks[0].push_back(l);
  const TensorTable table(shape, whole, 1, 0);
  const std::string key = "training.freeze='" + cfg.training.freeze + "'";
  // The model's names: those outside the blocks, then block 0's as h<l>.{...}.
  std::string outside, block;
  for (const TensorSpec& t : table.tensors()) {
    if (t.layer < 0) outside += (outside.empty() ? "" : ", ") + t.name;
    if (t.layer == 0) block += (block.empty() ? "" : ", ") + t.name.substr(t.name.find('.') + 1);
  }
  for (const std::string& p : patterns)
    if (std::none_of(table.tensors().begin(), table.tensors().end(), [&](const TensorSpec& t) { return frozen_by({p}, t.name); }))
      errs.push_back(key + ": the pattern '" + p + "' matches no tensor of this model, whose tensors are " + outside +
                     " and h<layer>.{" + block + "}");
  const auto is_frozen = [&](const std::string& name) { return frozen_by(patterns, name); };
  const auto& ts = table.tensors();
  if (std::all_of(ts.begin(), ts.end(), [&](const TensorSpec& t) { return is_frozen(t.name); }))
    errs.push_back(key + " freezes every tensor of the model: nothing would train");
  if (!shape.rope && is_frozen("wte") != is_frozen("wpe"))
    errs.push_back(key + " freezes one of wte and wpe: freeze both or neither (one kernel makes both gradients)");
  for (const TensorSpec& t : ts) {  // grouped-query attention packs h<l>.kv_w after h<l>.q_w (and the biases): one weight
    const std::size_t kv = t.name.rfind(".kv_");
    if (kv == std::string::npos) continue;
    const std::string q = t.name.substr(0, kv) + ".q_" + t.name.substr(kv + 4);
    if (is_frozen(q) != is_frozen(t.name)) {
      errs.push_back(key + " freezes one of " + q + " and " + t.name + ": they are one weight (grouped-query attention packs "
                     "them); freeze both or neither");
      break;
    }
  }
  return errs;
}

}  // namespace dtrain
