// model_differences: the model keys, compared one by one.
#include "ckpt/compatibility.hpp"

#include "common/error.hpp"

namespace dtrain {

std::vector<std::string> model_differences(const Config& saved, const Config& run) {
  std::vector<std::string> out;
  auto compare = [&out](const char* key, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(std::string(key) + " = " + a + " in the checkpoint, " + b + " in this run");
  };
  auto num = [](long v) { return std::to_string(v); };
  const ModelConfig &a = saved.model, &b = run.model;
  compare("model.num_layers", num(a.num_layers), num(b.num_layers));
  compare("model.hidden_size", num(a.hidden_size), num(b.hidden_size));
  compare("model.num_attention_heads", num(a.num_attention_heads), num(b.num_attention_heads));
  compare("model.ffn_hidden_size (resolved)", num(saved.ffn_hidden()), num(run.ffn_hidden()));
  compare("model.seq_length", num(a.seq_length), num(b.seq_length));
  compare("model.vocab_size", num(a.vocab_size), num(b.vocab_size));
  compare("model.num_experts", num(a.num_experts), num(b.num_experts));
  return out;
}

void check_same_model(const Config& saved, const Config& run, const std::string& checkpoint) {
  const auto diffs = model_differences(saved, run);
  if (diffs.empty()) return;
  std::string text = "checkpoint '" + checkpoint + "' was saved for another model:";
  for (const auto& d : diffs) text += "\n  " + d;
  text += "\nthe layout and batch keys may differ from the checkpoint's, the model keys may not; set them as saved, "
          "or start fresh (checkpoint.load=none or another checkpoint.dir)";
  throw UserError(text);
}

}  // namespace dtrain
