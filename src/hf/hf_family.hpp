// A Hugging Face model family as one table entry (hf_families.cpp): its names, the block design that
// makes a dtrain model one of it, its config.json keys against dtrain's [model] keys, and its tensors'
// names and layouts. Import, export, init_from=hf: and their refusals all read the table (hf_model.cpp);
// a new family is an entry there, plus the block features it needs.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {

using HfJson = nlohmann::json;

// Reads typed keys of one config.json, each error naming the file and the key.
class HfConfigReader {
 public:
  HfConfigReader(const HfJson& j, const std::string& path) : j_(j), path_(path) {}
  UserError error(const std::string& what) const;
  const HfJson& json() const { return j_; }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  int integer(const char* key) const;
  int integer(const char* key, int fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key, double fallback) const;
  bool flag(const char* key, bool fallback) const;
  std::string text(const char* key, const std::string& fallback) const;
  // A key whose only value dtrain trains is `expected` (absent counts as expected).
  void require(const char* key, const HfJson& expected, const std::string& why) const;

 private:
  const HfJson& j_;
  const std::string& path_;
};

// One config.json key that is one [model] key: read into and written from a ModelConfig field.
// Required where it has no fallback; `negated` for a flag that means the opposite of dtrain's
// (tie_word_embeddings against untie_embeddings_and_output_weights).
struct HfKey {
  const char* name;
  std::variant<int ModelConfig::*, double ModelConfig::*, bool ModelConfig::*> field;
  bool required = true;
  double fallback = 0;
  bool negated = false;
};

// One Hugging Face tensor: block `part` of `parts` equal blocks along the first dimension of dtrain's
// tensor `source`, as a (rows, last dim) matrix, transposed when `transpose`.
struct HfTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string source;
  int part = 0, parts = 1;
  bool transpose = false;
};

struct HfFamily {
  const char* architecture;  // config.json's "architectures": "LlamaForCausalLM"
  const char* model_type;    // config.json's "model_type": "llama"
  const char* design;        // the block design as [model] keys, for messages
  const char* bare_prefix;   // a prefix some uploads leave out of tensor names ("transformer." of GPT-2), or ""
  std::vector<HfKey> keys;
  // True when the dtrain model has the family's block design.
  std::function<bool(const Config&)> describes;
  // The design and what keys cannot say, read from config.json (after `keys`); a refusal names the key.
  std::function<void(const HfConfigReader&, ModelConfig&)> read;
  // config.json's keys beyond `keys` and the common ones (hf_config_json).
  std::function<void(const Config&, HfJson&)> write;
  // Every tensor of a model of the family, in model order (embeddings, layers, head); the untied
  // lm_head is added by the caller.
  std::function<void(const ModelShape&, std::vector<HfTensor>&)> tensors;
};

// Every family dtrain reads and writes, in the order messages list them.
const std::vector<HfFamily>& hf_families();

}  // namespace dtrain
