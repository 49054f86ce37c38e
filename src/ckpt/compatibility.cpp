// model_key_values / model_differences: the model keys through the options table, compared one by one.
#include "ckpt/compatibility.hpp"

#include "common/error.hpp"
#include "config/options.hpp"

namespace dtrain {

std::vector<std::pair<std::string, std::string>> model_key_values(const Config& cfg) {
  Config c = cfg;
  ModelConfig& m = c.model;
  m.ffn_hidden_size = cfg.ffn_hidden();
  const int kv = cfg.model.kv_heads();
  m.group_query_attention = kv != m.num_attention_heads;
  m.num_query_groups = m.group_query_attention ? kv : 1;
  m.moe_ffn_hidden_size = m.num_experts > 0 ? cfg.moe_ffn_hidden() : 0;
  const bool rope = m.position_embedding_type == PositionEmbedding::rope;
  static const char* const kKeys[] = {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "seq_length",
                                      "vocab_size", "num_experts", "normalization", "norm_epsilon", "position_embedding_type",
                                      "rotary_base", "rotary_percent", "rope_scaling", "rope_scaling_factor",
                                      "rope_scaling_low_freq_factor", "rope_scaling_high_freq_factor",
                                      "rope_scaling_original_max_position_embeddings", "swiglu", "group_query_attention", "num_query_groups",
                                      "untie_embeddings_and_output_weights", "add_bias_linear", "add_qkv_bias", "window_size", "window_attn_skip_freq", "kv_channels", "qk_layernorm", "moe_router_topk",
                                      "moe_ffn_hidden_size", "moe_layer_freq", "moe_layer_pattern", "moe_router_pre_softmax"};
  const OptionTable table(c);
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* key : kKeys) {
    const std::string name = std::string("model.") + key;
    const bool scaled = rope && m.rope_scaling != RopeScaling::none;
    const bool unused = (!rope && (name == "model.rotary_base" || name == "model.rotary_percent" || name == "model.rope_scaling")) ||
                        (!scaled && name.rfind("model.rope_scaling_", 0) == 0) ||
                        (!m.group_query_attention && name == "model.num_query_groups") ||
                        (m.window_size == 0 && name == "model.window_size") || (m.kv_channels == 0 && name == "model.kv_channels") ||
                        ((m.add_bias_linear || !m.add_qkv_bias) && name == "model.add_qkv_bias") ||
                        (m.num_experts == 0 && name.rfind("model.moe_", 0) == 0);
    for (const auto& o : table.options())
      if (o.name == name) out.emplace_back(name, unused ? std::string() : o.value_text());
  }
  return out;
}

std::vector<std::string> model_differences(const Config& saved, const Config& run, const std::string& saved_as) {
  const auto a = model_key_values(saved), b = model_key_values(run);
  const bool rope = saved.model.position_embedding_type == PositionEmbedding::rope &&
                    run.model.position_embedding_type == PositionEmbedding::rope;
  std::vector<std::string> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].second == b[i].second || (rope && a[i].first == "model.seq_length")) continue;
    auto shown = [](const std::string& v) { return v.empty() ? std::string("(unused)") : v; };
    out.push_back(a[i].first + " = " + shown(a[i].second) + " in " + saved_as + ", " + shown(b[i].second) + " in this run");
  }
  return out;
}

void check_same_model(const Config& saved, const Config& run, const std::string& what, const std::string& saved_as) {
  const auto diffs = model_differences(saved, run, saved_as);
  if (diffs.empty()) return;
  std::string text = what + " was saved for another model:";
  for (const auto& d : diffs) text += "\n  " + d;
  text += "\nthe layout and batch keys may differ from the saved ones, the model keys may not; set them as saved";
  throw UserError(text);
}

}  // namespace dtrain
