// dtrain's model as a Hugging Face transformers model: which architecture it is (GPT2LMHeadModel or
// LlamaForCausalLM), its config.json, and every HF tensor's name, shape and place in dtrain's global
// tensors (tensor_table.hpp). Pure: no files, no MPI.
//
// GPT-2 (LayerNorm, learned positions, GELU (tanh), biases):
//   transformer.wte.weight (V,C) = wte          transformer.wpe.weight (T,C) = wpe
//   transformer.h.<l>.ln_1.{weight,bias}        = h<l>.ln1_w, ln1_b
//   transformer.h.<l>.attn.c_attn.weight (C,3C) = h<l>.qkv_w (3,C,C) as a (3C,C) matrix, transposed (Conv1D
//                                                 stores (in,out)); .bias (3C) = qkv_b
//   transformer.h.<l>.attn.c_proj.weight (C,C)  = proj_w transposed; mlp.c_fc.weight (C,F) = fc_w transposed;
//   transformer.h.<l>.mlp.c_proj.weight (F,C)   = fcproj_w transposed; biases as they are
//   transformer.ln_f.{weight,bias}; lm_head.weight = lm_head only when untied (tied: not stored)
// Llama (RMSNorm, RoPE over whole heads, SwiGLU, no positions table; biases optional):
//   model.embed_tokens.weight = wte; model.layers.<l>.input_layernorm.weight = ln1_w
//   self_attn.q_proj.weight (NH*HD,C) = q_w, or block 0 of qkv_w; k_proj/v_proj (G*HD,C) = blocks of kv_w
//   (or blocks 1, 2 of qkv_w); o_proj.weight = proj_w; post_attention_layernorm.weight = ln2_w;
//   mlp.gate_proj/up_proj (F,C) = blocks 0, 1 of fc_w; mlp.down_proj (C,F) = fcproj_w; model.norm.weight
//   = lnf_w; lm_head.weight = lm_head (untied). dtrain's RoPE rotates pairs (i, i + HD/2) of each head,
//   which is the layout of Hugging Face's q_proj/k_proj (rotate_half), so no rows are permuted.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

enum class HfArchitecture { gpt2, llama };
const char* hf_class_name(HfArchitecture a);  // "GPT2LMHeadModel", "LlamaForCausalLM"

// The architecture of cfg's model; UserError naming the keys that neither GPT-2 nor Llama has.
HfArchitecture hf_architecture(const Config& cfg);

// One Hugging Face tensor: block `part` of `parts` equal blocks along the first dimension of dtrain's
// tensor `source`, as a (rows, last dim) matrix, transposed when `transpose`.
struct HfTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string source;
  int part = 0, parts = 1;
  bool transpose = false;
};

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

// The [model] keys that describe the architecture, as input-file lines ("num_layers = 4\n...").
std::string model_keys_text(const Config& cfg);

}  // namespace dtrain
