// The Llama-style families' shared pieces (hf_llama_style.hpp): config.json's Llama block, read and
// written, RoPE's keys, the sliding window, and the tensor list.
#include "hf/hf_llama_style.hpp"

namespace dtrain {

using Json = HfJson;

void read_rope(const HfConfigReader& r, ModelConfig& m) {
  const Json& j = r.json();
  const auto scaling_of = [&](const Json& scaling, const char* key) {
    if (scaling.is_null()) return;
    if (!scaling.is_object()) throw r.error("'" + std::string(key) + "' is not an object");
    const Json type = scaling.contains("rope_type") ? scaling["rope_type"] : scaling.contains("type") ? scaling["type"] : Json("default");
    if (scaling.contains("partial_rotary_factor") && scaling["partial_rotary_factor"] != Json(1.0))
      throw r.error("'" + std::string(key) + "' has a partial_rotary_factor; dtrain's Llama rotates whole heads");
    if (type == "default") {
      if (m.rope_scaling != RopeScaling::none) throw r.error("'rope_scaling' and 'rope_parameters' give different scalings");
      return;
    }
    if (type != "llama3")
      throw r.error("'" + std::string(key) + "' = " + scaling.dump(-1, ' ', false, Json::error_handler_t::replace) +
                    ": dtrain implements plain RoPE and Llama 3.1's scaling (rope_type llama3), not this one");
    const auto number = [&](const char* field) {
      if (!scaling.contains(field) || !scaling[field].is_number())
        throw r.error("'" + std::string(key) + "." + field + "' is missing or not a number (rope_type llama3 needs it)");
      return scaling[field].get<double>();
    };
    ModelConfig scaled = m;
    scaled.rope_scaling = RopeScaling::llama3;
    scaled.rope_scaling_factor = number("factor");
    scaled.rope_scaling_low_freq_factor = number("low_freq_factor");
    scaled.rope_scaling_high_freq_factor = number("high_freq_factor");
    scaled.rope_scaling_original_max_position_embeddings = number("original_max_position_embeddings");
    if (m.rope_scaling == RopeScaling::llama3 &&
        (scaled.rope_scaling_factor != m.rope_scaling_factor || scaled.rope_scaling_low_freq_factor != m.rope_scaling_low_freq_factor ||
         scaled.rope_scaling_high_freq_factor != m.rope_scaling_high_freq_factor ||
         scaled.rope_scaling_original_max_position_embeddings != m.rope_scaling_original_max_position_embeddings))
      throw r.error("'rope_scaling' and 'rope_parameters' give different scalings");
    m = scaled;
  };
  if (j.contains("rope_scaling")) scaling_of(j["rope_scaling"], "rope_scaling");
  m.rotary_base = r.number("rope_theta", 10000.0);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const Json& p = j["rope_parameters"];
    scaling_of(p, "rope_parameters");
    if (p.contains("rope_theta")) {
      if (!p["rope_theta"].is_number()) throw r.error("'rope_parameters.rope_theta' is not a number");
      const double t = p["rope_theta"].get<double>();
      if (r.has("rope_theta") && t != m.rotary_base) throw r.error("'rope_theta' and 'rope_parameters.rope_theta' differ");
      m.rotary_base = t;
    }
  }
}

void read_llama_block(const HfConfigReader& r, ModelConfig& m) {
  const int groups = r.integer("num_key_value_heads", m.num_attention_heads);
  m.group_query_attention = groups != m.num_attention_heads;
  m.num_query_groups = m.group_query_attention ? groups : 1;
  m.normalization = Normalization::rmsnorm;
  m.position_embedding_type = PositionEmbedding::rope;
  read_rope(r, m);
  m.swiglu = true;
  const std::string act = r.text("hidden_act", "silu");
  if (act != "silu") throw r.error("'hidden_act' = \"" + act + "\": dtrain's SwiGLU gates with silu");
  r.require("partial_rotary_factor", 1.0, "dtrain's Llama export and import rotate whole heads");
  // head_dim: model.kv_channels where the heads do not split the hidden size (Mistral Nemo, Qwen3).
  if (m.num_attention_heads > 0 && r.has("head_dim")) {
    const int head_dim = r.integer("head_dim");
    if (head_dim < 1) throw r.error("'head_dim' = " + std::to_string(head_dim) + " is not a size");
    m.kv_channels = head_dim * m.num_attention_heads == m.hidden_size ? 0 : head_dim;
  }
}

void write_llama_block(const Config& c, Json& j) {
  const ModelConfig& m = c.model;
  j["attention_dropout"] = 0.0;
  j["head_dim"] = c.head_dim();
  j["hidden_act"] = "silu";
  j["intermediate_size"] = c.ffn_hidden();
  j["num_key_value_heads"] = m.kv_heads();
  j["rope_theta"] = m.rotary_base;
}

bool llama_style(const Config& c, bool qk_norm, bool moe) {
  const ModelConfig& m = c.model;
  return m.normalization == Normalization::rmsnorm && m.position_embedding_type == PositionEmbedding::rope && m.swiglu &&
         c.rotary_dims() == c.head_dim() && m.qk_layernorm == qk_norm && (m.num_experts > 0) == moe &&
         m.window_attn_skip_freq == 0;  // no family here has blocks with and without the window
}

void read_sliding_window(const HfConfigReader& r, ModelConfig& m, int absent) {
  const HfJson& j = r.json();
  m.window_size = !j.contains("sliding_window") ? absent : j["sliding_window"].is_null() ? 0 : r.integer("sliding_window");
  if (m.window_size < 0) throw r.error("'sliding_window' is negative");
}

void llama_style_tensors(const ModelShape& s, std::vector<HfTensor>& out, const MoeNames& moe) {
  const std::int64_t C = s.hidden, F = s.ffn, Fe = s.moe_ffn, V = s.vocab, HD = s.head_dim(), Q = s.heads * HD, KV = s.kv_heads * HD;
  const auto add = [&](std::string name, std::vector<std::int64_t> shape, std::string source, int part = 0, int parts = 1) {
    out.push_back({std::move(name), std::move(shape), std::move(source), part, parts, false});
  };
  add("model.embed_tokens.weight", {V, C}, "wte");
  for (int l = 0; l < s.num_layers; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".", d = "h" + std::to_string(l) + ".";
    add(h + "input_layernorm.weight", {C}, d + "ln1_w");
    for (const bool bias : {false, true}) {  // q, k, v biases with s.qkv_bias; o's with s.bias
      if (bias && !s.qkv_bias) continue;
      const std::string sfx = bias ? ".bias" : ".weight", suffix = bias ? "_b" : "_w";
      auto shape = [&](std::int64_t rows) { return bias ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, C}; };
      const std::string qkv = s.grouped() ? "" : d + "qkv" + suffix;
      add(h + "self_attn.q_proj" + sfx, shape(Q), s.grouped() ? d + "q" + suffix : qkv, 0, s.grouped() ? 1 : 3);
      add(h + "self_attn.k_proj" + sfx, shape(KV), s.grouped() ? d + "kv" + suffix : qkv, s.grouped() ? 0 : 1, s.grouped() ? 2 : 3);
      add(h + "self_attn.v_proj" + sfx, shape(KV), s.grouped() ? d + "kv" + suffix : qkv, s.grouped() ? 1 : 2, s.grouped() ? 2 : 3);
      if (!bias || s.bias)
        add(h + "self_attn.o_proj" + sfx, bias ? std::vector<std::int64_t>{C} : std::vector<std::int64_t>{C, Q}, d + "proj" + suffix);
    }
    if (s.qk_norm) {
      add(h + "self_attn.q_norm.weight", {HD}, d + "qnorm_w");
      add(h + "self_attn.k_norm.weight", {HD}, d + "knorm_w");
    }
    add(h + "post_attention_layernorm.weight", {C}, d + "ln2_w");
    if (s.moe(l)) {
      const std::string m = h + moe.prefix;
      add(m + "gate.weight", {s.experts, C}, d + "router_w");
      for (int e = 0; e < s.experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        add(x + moe.gate + ".weight", {Fe, C}, d + "expert_fc_w", 2 * e, 2 * s.experts);
        add(x + moe.up + ".weight", {Fe, C}, d + "expert_fc_w", 2 * e + 1, 2 * s.experts);
        add(x + moe.down + ".weight", {C, Fe}, d + "expert_fcproj_w", e, s.experts);
      }
      continue;
    }
    add(h + "mlp.gate_proj.weight", {F, C}, d + "fc_w", 0, 2);
    add(h + "mlp.up_proj.weight", {F, C}, d + "fc_w", 1, 2);
    add(h + "mlp.down_proj.weight", {C, F}, d + "fcproj_w");
    if (s.bias) {
      add(h + "mlp.gate_proj.bias", {F}, d + "fc_b", 0, 2);
      add(h + "mlp.up_proj.bias", {F}, d + "fc_b", 1, 2);
      add(h + "mlp.down_proj.bias", {C}, d + "fcproj_b");
    }
  }
  add("model.norm.weight", {C}, "lnf_w");
}

}  // namespace dtrain
