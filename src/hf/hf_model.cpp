// The Hugging Face view of dtrain's model, read from the table of families (hf_families.cpp): the
// family of a model, its tensor map, config.json both ways.
#include "hf/hf_model.hpp"

#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>
#include <variant>

#include "ckpt/compatibility.hpp"
#include "common/bounded_json.hpp"
#include "common/error.hpp"
#include "config/validate.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {

using Json = nlohmann::json;

UserError HfConfigReader::error(const std::string& what) const { return UserError("'" + path_ + "': " + what); }

int HfConfigReader::integer(const char* key) const {
  if (!has(key) || !j_[key].is_number_integer()) throw error("'" + std::string(key) + "' is missing or not an integer");
  const auto v = j_[key].get<long long>();
  if (v < 1 || v > (1ll << 30)) throw error("'" + std::string(key) + "' = " + std::to_string(v) + " is not a size");
  return static_cast<int>(v);
}

double HfConfigReader::number(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_number()) throw error("'" + std::string(key) + "' is not a number");
  return j_[key].get<double>();
}

bool HfConfigReader::flag(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_boolean()) throw error("'" + std::string(key) + "' is not true or false");
  return j_[key].get<bool>();
}

std::string HfConfigReader::text(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_string()) throw error("'" + std::string(key) + "' is not a string");
  return j_[key].get<std::string>();
}

void HfConfigReader::require(const char* key, const Json& expected, const std::string& why) const {
  if (has(key) && j_[key] != expected) throw error("'" + std::string(key) + "' = " + j_[key].dump() + ": " + why);
}

const HfFamily& hf_family(const Config& cfg) {
  const ModelConfig& m = cfg.model;
  for (const HfFamily& f : hf_families())
    if (f.describes(cfg)) return f;
  std::ostringstream os;
  os << "this model (normalization=" << m.normalization << ", position_embedding_type=" << m.position_embedding_type
     << ", rotary_percent=" << m.rotary_percent << ", swiglu=" << (m.swiglu ? "true" : "false")
     << ", group_query_attention=" << (m.group_query_attention ? "true" : "false")
     << ", add_bias_linear=" << (m.add_bias_linear ? "true" : "false") << ", add_qkv_bias=" << (m.add_qkv_bias ? "true" : "false")
     << ", window_size=" << m.window_size << ", kv_channels=" << m.kv_channels << ", qk_layernorm=" << (m.qk_layernorm ? "true" : "false")
     << ", rope_scaling=" << m.rope_scaling << ", num_experts=" << m.num_experts
     << (m.num_experts > 0 ? ", moe_layer_freq=" + std::to_string(m.moe_layer_freq) +
                                 ", moe_router_pre_softmax=" + (m.moe_router_pre_softmax ? "true" : "false")
                           : std::string())
     << ") is none of the Hugging Face families dtrain writes:";
  for (const HfFamily& f : hf_families()) os << (&f == &hf_families().front() ? " " : "; ") << f.architecture << " (" << f.design << ")";
  throw UserError(os.str());
}

std::vector<HfTensor> hf_tensors(const Config& cfg) {
  const HfFamily& family = hf_family(cfg);
  const ModelShape s = ModelShape::from(cfg);
  std::vector<HfTensor> out;
  family.tensors(s, out);
  if (!s.tied) out.push_back({"lm_head.weight", {s.vocab, s.hidden}, "lm_head", 0, 1, false});
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
  const HfFamily& family = hf_family(cfg);
  Json j;
  j["architectures"] = {family.architecture};
  j["bos_token_id"] = nullptr;  // dtrain's tokenizers have none; GPT2Config's default 50256 could be outside the vocabulary
  j["eos_token_id"] = nullptr;
  j["dtrain_tokenizer"] = tokenizer;
  j["initializer_range"] = 0.02;
  j["model_type"] = family.model_type;
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  for (const HfKey& k : family.keys)
    std::visit(
        [&](auto field) {
          if constexpr (std::is_same_v<decltype(field), bool ModelConfig::*>)
            j[k.name] = k.negated != (m.*field);
          else
            j[k.name] = m.*field;
        },
        k.field);
  family.write(cfg, j);
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {

// The model of a parsed config.json (config_from_hf): the family its model_type names, its keys, then
// what the family reads beyond them.
HfModelConfig parse_hf_config(const Json& j, const std::string& path) {
  const HfConfigReader r(j, path);
  HfModelConfig out;
  ModelConfig& m = out.cfg.model;
  const std::string type = r.text("model_type", "");
  const HfFamily* family = nullptr;
  std::string known;
  for (const HfFamily& f : hf_families()) {
    if (type == f.model_type) family = &f;
    known += (known.empty() ? "" : ", ") + std::string(f.model_type);
  }
  if (!family) throw r.error("model_type \"" + type + "\" is not one dtrain reads (" + known + ")");
  for (const HfKey& k : family->keys) {
    if (auto* f = std::get_if<int ModelConfig::*>(&k.field))
      m.*(*f) = k.required ? r.integer(k.name) : r.integer(k.name, static_cast<int>(k.fallback));
    else if (auto* d = std::get_if<double ModelConfig::*>(&k.field))
      m.*(*d) = r.number(k.name, k.fallback);
    else if (auto* b = std::get_if<bool ModelConfig::*>(&k.field))
      m.*(*b) = r.flag(k.name, k.fallback != 0) != k.negated;
  }
  family->read(r, m);
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

std::vector<std::pair<std::string, std::string>> model_keys(const Config& cfg) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : model_key_values(cfg))
    if (!value.empty() && (cfg.model.num_experts > 0 || (key.rfind("model.num_experts", 0) != 0 && key.rfind("model.moe_", 0) != 0)))
      out.emplace_back(key, value);
  return out;
}

std::string model_keys_text(const Config& cfg) {
  std::string text;
  for (const auto& [key, value] : model_keys(cfg)) text += key.substr(6) + " = " + value + "\n";
  return text;
}

}  // namespace dtrain
