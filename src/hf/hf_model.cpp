// The Hugging Face view of dtrain's model: architecture choice, tensor map, config.json both ways.
#include "hf/hf_model.hpp"

#include <nlohmann/json.hpp>
#include <sstream>

#include "ckpt/compatibility.hpp"
#include "common/bounded_json.hpp"
#include "common/error.hpp"
#include "config/validate.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {
namespace {

using Json = nlohmann::json;

bool is_llama(const ModelConfig& m, const Config& c) {
  return m.normalization == Normalization::rmsnorm && m.position_embedding_type == PositionEmbedding::rope && m.swiglu &&
         c.rotary_dims() == m.hidden_size / m.num_attention_heads;
}

bool is_gpt2(const ModelConfig& m) {
  return m.normalization == Normalization::layernorm && m.position_embedding_type == PositionEmbedding::learned_absolute &&
         !m.swiglu && !m.group_query_attention && m.add_bias_linear;
}

// Reads typed keys of one config.json, each error naming the file and the key.
class ConfigReader {
 public:
  ConfigReader(const Json& j, const std::string& path) : j_(j), path_(path) {}
  UserError error(const std::string& what) const { return UserError("'" + path_ + "': " + what); }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  int integer(const char* key) const {
    if (!has(key) || !j_[key].is_number_integer()) throw error("'" + std::string(key) + "' is missing or not an integer");
    const auto v = j_[key].get<long long>();
    if (v < 1 || v > (1ll << 30)) throw error("'" + std::string(key) + "' = " + std::to_string(v) + " is not a size");
    return static_cast<int>(v);
  }
  int integer(const char* key, int fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number()) throw error("'" + std::string(key) + "' is not a number");
    return j_[key].get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) throw error("'" + std::string(key) + "' is not true or false");
    return j_[key].get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) throw error("'" + std::string(key) + "' is not a string");
    return j_[key].get<std::string>();
  }
  // A key whose only value dtrain trains is `expected` (absent counts as expected).
  template <typename T>
  void require(const char* key, const T& expected, const std::string& why) const {
    if (has(key) && j_[key] != Json(expected)) throw error("'" + std::string(key) + "' = " + j_[key].dump() + ": " + why);
  }

 private:
  const Json& j_;
  const std::string& path_;
};

// RoPE of a Llama config.json: theta from rope_theta (transformers 4) or rope_parameters.rope_theta
// (transformers 5); the scaling from rope_scaling or rope_parameters (rope_type, or the older "type"):
// "default" (plain RoPE) or "llama3" (Llama 3.1's remapping, with its four numbers), nothing else.
// Both given must agree.
void read_rope(const Json& j, const ConfigReader& r, ModelConfig& m) {
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

}  // namespace

const char* hf_class_name(HfArchitecture a) { return a == HfArchitecture::gpt2 ? "GPT2LMHeadModel" : "LlamaForCausalLM"; }

HfArchitecture hf_architecture(const Config& cfg) {
  const ModelConfig& m = cfg.model;
  if (m.num_experts > 0)
    throw UserError("model.num_experts=" + std::to_string(m.num_experts) +
                    ": mixture-of-experts models have no Hugging Face mapping in dtrain (GPT2LMHeadModel and "
                    "LlamaForCausalLM are dense); export a model with num_experts=0");
  if (is_llama(m, cfg)) return HfArchitecture::llama;
  if (is_gpt2(m)) return HfArchitecture::gpt2;
  std::ostringstream os;
  os << "this model (normalization=" << m.normalization << ", position_embedding_type=" << m.position_embedding_type
     << ", rotary_percent=" << m.rotary_percent << ", swiglu=" << (m.swiglu ? "true" : "false")
     << ", group_query_attention=" << (m.group_query_attention ? "true" : "false")
     << ", add_bias_linear=" << (m.add_bias_linear ? "true" : "false")
     << ") is neither GPT2LMHeadModel (LayerNorm, learned_absolute, GELU, multi-head attention, add_bias_linear=true) "
        "nor LlamaForCausalLM (RMSNorm, rope with rotary_percent=1, swiglu) as Hugging Face defines them";
  throw UserError(os.str());
}

std::vector<HfTensor> hf_tensors(const Config& cfg) {
  const HfArchitecture arch = hf_architecture(cfg);
  const ModelShape s = ModelShape::from(cfg);
  const std::int64_t C = s.hidden, F = s.ffn, V = s.vocab, T = s.seq_length, Q = static_cast<std::int64_t>(s.heads) * s.head_dim(),
                     KV = static_cast<std::int64_t>(s.kv_heads) * s.head_dim();
  std::vector<HfTensor> out;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, std::string source, int part = 0, int parts = 1,
                 bool transpose = false) {
    out.push_back({std::move(name), std::move(shape), std::move(source), part, parts, transpose});
  };
  if (arch == HfArchitecture::gpt2) {
    add("transformer.wte.weight", {V, C}, "wte");
    add("transformer.wpe.weight", {T, C}, "wpe");
    for (int l = 0; l < s.num_layers; ++l) {
      const std::string h = "transformer.h." + std::to_string(l) + ".", d = "h" + std::to_string(l) + ".";
      add(h + "ln_1.weight", {C}, d + "ln1_w");
      add(h + "ln_1.bias", {C}, d + "ln1_b");
      add(h + "attn.c_attn.weight", {C, 3 * C}, d + "qkv_w", 0, 1, true);
      add(h + "attn.c_attn.bias", {3 * C}, d + "qkv_b");
      add(h + "attn.c_proj.weight", {C, C}, d + "proj_w", 0, 1, true);
      add(h + "attn.c_proj.bias", {C}, d + "proj_b");
      add(h + "ln_2.weight", {C}, d + "ln2_w");
      add(h + "ln_2.bias", {C}, d + "ln2_b");
      add(h + "mlp.c_fc.weight", {C, F}, d + "fc_w", 0, 1, true);
      add(h + "mlp.c_fc.bias", {F}, d + "fc_b");
      add(h + "mlp.c_proj.weight", {F, C}, d + "fcproj_w", 0, 1, true);
      add(h + "mlp.c_proj.bias", {C}, d + "fcproj_b");
    }
    add("transformer.ln_f.weight", {C}, "lnf_w");
    add("transformer.ln_f.bias", {C}, "lnf_b");
  } else {
    add("model.embed_tokens.weight", {V, C}, "wte");
    for (int l = 0; l < s.num_layers; ++l) {
      const std::string h = "model.layers." + std::to_string(l) + ".", d = "h" + std::to_string(l) + ".";
      add(h + "input_layernorm.weight", {C}, d + "ln1_w");
      for (const char* w : {"weight", "bias"}) {
        const bool bias = std::string(w) == "bias";
        if (bias && !s.bias) continue;
        const std::string sfx = std::string(".") + w, suffix = bias ? "_b" : "_w";
        auto shape = [&](std::int64_t rows) { return bias ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, C}; };
        if (s.grouped()) {
          add(h + "self_attn.q_proj" + sfx, shape(Q), d + "q" + suffix);
          add(h + "self_attn.k_proj" + sfx, shape(KV), d + "kv" + suffix, 0, 2);
          add(h + "self_attn.v_proj" + sfx, shape(KV), d + "kv" + suffix, 1, 2);
        } else {
          add(h + "self_attn.q_proj" + sfx, shape(Q), d + "qkv" + suffix, 0, 3);
          add(h + "self_attn.k_proj" + sfx, shape(KV), d + "qkv" + suffix, 1, 3);
          add(h + "self_attn.v_proj" + sfx, shape(KV), d + "qkv" + suffix, 2, 3);
        }
        add(h + "self_attn.o_proj" + sfx, bias ? std::vector<std::int64_t>{C} : std::vector<std::int64_t>{C, Q}, d + "proj" + suffix);
      }
      add(h + "post_attention_layernorm.weight", {C}, d + "ln2_w");
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
  if (!s.tied) add("lm_head.weight", {V, C}, "lm_head");
  return out;
}

std::vector<float> to_hf(const HfTensor& t, const std::vector<float>& source, std::int64_t cols) {
  const std::size_t block = source.size() / static_cast<std::size_t>(t.parts);
  const float* in = source.data() + block * static_cast<std::size_t>(t.part);
  std::vector<float> out(in, in + block);
  if (t.transpose) {
    const std::size_t c = static_cast<std::size_t>(cols), rows = block / c;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t k = 0; k < c; ++k) out[k * rows + r] = in[r * c + k];
  }
  return out;
}

void from_hf(const HfTensor& t, const std::vector<float>& hf, std::vector<float>& source, std::int64_t cols) {
  const std::size_t block = source.size() / static_cast<std::size_t>(t.parts);
  float* out = source.data() + block * static_cast<std::size_t>(t.part);
  if (!t.transpose) {
    std::copy(hf.begin(), hf.begin() + static_cast<std::ptrdiff_t>(block), out);
    return;
  }
  const std::size_t c = static_cast<std::size_t>(cols), rows = block / c;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t k = 0; k < c; ++k) out[r * c + k] = hf[k * rows + r];
}

std::string hf_config_json(const Config& cfg, const std::string& torch_dtype, const std::string& tokenizer) {
  const ModelConfig& m = cfg.model;
  const HfArchitecture arch = hf_architecture(cfg);
  Json j;
  j["architectures"] = {hf_class_name(arch)};
  j["bos_token_id"] = nullptr;  // dtrain's tokenizers have none; GPT2Config's default 50256 could be outside the vocabulary
  j["eos_token_id"] = nullptr;
  j["dtrain_tokenizer"] = tokenizer;
  j["initializer_range"] = 0.02;
  j["tie_word_embeddings"] = !m.untie_embeddings_and_output_weights;
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  j["vocab_size"] = m.vocab_size;
  if (arch == HfArchitecture::gpt2) {
    j["model_type"] = "gpt2";
    j["activation_function"] = "gelu_new";  // the tanh approximation, as dtrain's GELU
    j["attn_pdrop"] = j["embd_pdrop"] = j["resid_pdrop"] = 0.0;
    j["layer_norm_epsilon"] = m.norm_epsilon;
    j["n_ctx"] = j["n_positions"] = m.seq_length;
    j["n_embd"] = m.hidden_size;
    j["n_head"] = m.num_attention_heads;
    j["n_inner"] = cfg.ffn_hidden();
    j["n_layer"] = m.num_layers;
    j["scale_attn_weights"] = true;
  } else {
    j["model_type"] = "llama";
    j["attention_bias"] = j["mlp_bias"] = m.add_bias_linear;
    j["attention_dropout"] = 0.0;
    j["head_dim"] = m.hidden_size / m.num_attention_heads;
    j["hidden_act"] = "silu";
    j["hidden_size"] = m.hidden_size;
    j["intermediate_size"] = cfg.ffn_hidden();
    j["max_position_embeddings"] = m.seq_length;
    j["num_attention_heads"] = m.num_attention_heads;
    j["num_hidden_layers"] = m.num_layers;
    j["num_key_value_heads"] = m.kv_heads();
    j["pretraining_tp"] = 1;
    j["rms_norm_eps"] = m.norm_epsilon;
    j["rope_scaling"] = nullptr;
    if (m.rope_scaling == RopeScaling::llama3)
      j["rope_scaling"] = {{"factor", m.rope_scaling_factor},
                           {"high_freq_factor", m.rope_scaling_high_freq_factor},
                           {"low_freq_factor", m.rope_scaling_low_freq_factor},
                           {"original_max_position_embeddings", static_cast<long long>(m.rope_scaling_original_max_position_embeddings)},
                           {"rope_type", "llama3"}};
    j["rope_theta"] = m.rotary_base;
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {

// The model of a parsed config.json (config_from_hf).
HfModelConfig parse_hf_config(const Json& j, const std::string& path) {
  const ConfigReader r(j, path);
  HfModelConfig out;
  ModelConfig& m = out.cfg.model;
  const std::string type = r.text("model_type", "");
  if (type == "gpt2") {
    m.num_layers = r.integer("n_layer");
    m.hidden_size = r.integer("n_embd");
    m.num_attention_heads = r.integer("n_head");
    m.seq_length = r.integer("n_positions");
    m.vocab_size = r.integer("vocab_size");
    m.ffn_hidden_size = r.integer("n_inner", 4 * m.hidden_size);
    const std::string act = r.text("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      throw r.error("'activation_function' = \"" + act + "\": dtrain's GPT-2 MLP uses GELU's tanh approximation (gelu_new)");
    m.norm_epsilon = r.number("layer_norm_epsilon", 1e-5);
    m.untie_embeddings_and_output_weights = !r.flag("tie_word_embeddings", true);
    r.require("scale_attn_weights", true, "dtrain scales attention scores by 1/sqrt(head_dim)");
    r.require("scale_attn_by_inverse_layer_idx", false, "dtrain does not scale attention by layer");
  } else if (type == "llama") {
    m.num_layers = r.integer("num_hidden_layers");
    m.hidden_size = r.integer("hidden_size");
    m.num_attention_heads = r.integer("num_attention_heads");
    const int groups = r.integer("num_key_value_heads", m.num_attention_heads);
    m.group_query_attention = groups != m.num_attention_heads;
    m.num_query_groups = m.group_query_attention ? groups : 1;
    m.ffn_hidden_size = r.integer("intermediate_size");
    m.seq_length = r.integer("max_position_embeddings");
    m.vocab_size = r.integer("vocab_size");
    m.normalization = Normalization::rmsnorm;
    m.norm_epsilon = r.number("rms_norm_eps", 1e-6);
    m.position_embedding_type = PositionEmbedding::rope;
    read_rope(j, r, m);
    m.swiglu = true;
    m.untie_embeddings_and_output_weights = !r.flag("tie_word_embeddings", false);
    const bool attention_bias = r.flag("attention_bias", false), mlp_bias = r.flag("mlp_bias", false);
    if (attention_bias != mlp_bias)
      throw r.error("'attention_bias' and 'mlp_bias' differ; dtrain's model.add_bias_linear gives both layers biases or neither");
    m.add_bias_linear = attention_bias;
    const std::string act = r.text("hidden_act", "silu");
    if (act != "silu") throw r.error("'hidden_act' = \"" + act + "\": dtrain's SwiGLU gates with silu");
    r.require("partial_rotary_factor", 1.0, "dtrain's Llama export and import rotate whole heads");
    if (m.num_attention_heads > 0 && r.integer("head_dim", m.hidden_size / m.num_attention_heads) * m.num_attention_heads != m.hidden_size)
      throw r.error("'head_dim' x 'num_attention_heads' is not 'hidden_size'; dtrain's heads split the hidden size");
  } else {
    throw r.error("model_type \"" + type + "\" is not one dtrain reads (gpt2, llama)");
  }
  out.tokenizer = r.text("dtrain_tokenizer", "");
  if (m.num_attention_heads > 0 && m.hidden_size % m.num_attention_heads != 0)
    throw r.error("hidden size " + std::to_string(m.hidden_size) + " is not divisible by the " +
                  std::to_string(m.num_attention_heads) + " attention heads");
  try {
    validate_config(out.cfg);
  } catch (const UserError& e) {
    throw r.error(std::string("the model it describes is not one dtrain can hold: ") + e.what());
  }
  return out;
}

}  // namespace

HfModelConfig config_from_hf(const std::string& json_text, const std::string& path) {
  Json j;
  if (std::string error; !parse_bounded_json(json_text, j, error)) throw UserError("'" + path + "' is not JSON: " + error);
  if (!j.is_object()) throw UserError("'" + path + "' is not a JSON object");
  try {
    return parse_hf_config(j, path);
  } catch (const Json::exception& e) {  // a key of an unexpected type
    throw UserError("'" + path + "': " + e.what());
  }
}

std::string model_keys_text(const Config& cfg) {
  std::string text;
  for (const auto& [key, value] : model_key_values(cfg))
    if (!value.empty() && key.rfind("model.num_experts", 0) != 0 && key.rfind("model.moe_", 0) != 0) text += key.substr(6) + " = " + value + "\n";
  return text;
}

}  // namespace dtrain
