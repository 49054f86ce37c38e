// dtrain's model as a Hugging Face transformers model: which family it is (hf_family.hpp: the table
// of families in hf_families.cpp), its config.json, and every HF tensor's name, shape and place in
// dtrain's global tensors (tensor_table.hpp). Pure: no files, no MPI.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "hf/hf_family.hpp"

namespace dtrain {

// The family of cfg's model; UserError naming the model's design and every family's where none has it.
const HfFamily& hf_family(const Config& cfg);

// Every tensor of cfg's model in Hugging Face's naming, in model order (embeddings, layers, head).
std::vector<HfTensor> hf_tensors(const Config& cfg);

// HF values of t from the whole dtrain tensor t.source (numel elements, last dimension `cols`).
std::vector<float> to_hf(const HfTensor& t, const std::vector<float>& source, std::int64_t cols);
// The inverse: writes t's values into their block of the dtrain tensor.
void from_hf(const HfTensor& t, const std::vector<float>& hf, std::vector<float>& source, std::int64_t cols);

// config.json of cfg's model (sorted keys, 2-space indent, as transformers writes it). torch_dtype is
// "float32" or "bfloat16"; the tokenizer identity is kept as "dtrain_tokenizer".
std::string hf_config_json(const Config& cfg, const std::string& torch_dtype, const std::string& tokenizer);

// The model a config.json describes, as dtrain's [model] keys (every other key at its default), and
// the dtrain_tokenizer it names ("" if none). UserError naming the file and the key that dtrain cannot
// train as described (another architecture, a RoPE scaling other than llama3, another activation, ...).
struct HfModelConfig {
  Config cfg;
  std::string tokenizer;
};
HfModelConfig config_from_hf(const std::string& json_text, const std::string& path);

// The [model] keys that describe the architecture ("model.num_layers", "4"), those in use.
std::vector<std::pair<std::string, std::string>> model_keys(const Config& cfg);
// The same as input-file lines ("num_layers = 4\n...").
std::string model_keys_text(const Config& cfg);

}  // namespace dtrain
