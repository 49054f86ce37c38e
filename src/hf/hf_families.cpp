// The Hugging Face families dtrain reads and writes, one entry each (hf_family.hpp).
//
// GPT-2 (GPT2LMHeadModel: LayerNorm, learned positions, GELU (tanh), biases):
//   transformer.wte.weight (V,C) = wte          transformer.wpe.weight (T,C) = wpe
//   transformer.h.<l>.ln_1.{weight,bias}        = h<l>.ln1_w, ln1_b
//   transformer.h.<l>.attn.c_attn.weight (C,3C) = h<l>.qkv_w (3,C,C) as a (3C,C) matrix, transposed (Conv1D
//                                                 stores (in,out)); .bias (3C) = qkv_b
//   transformer.h.<l>.attn.c_proj.weight (C,C)  = proj_w transposed; mlp.c_fc.weight (C,F) = fc_w transposed;
//   transformer.h.<l>.mlp.c_proj.weight (F,C)   = fcproj_w transposed; biases as they are
//   transformer.ln_f.{weight,bias}; lm_head.weight = lm_head only when untied (tied: not stored)
// The Llama-style families (Llama, Mistral, Qwen2, Qwen3, Mixtral, Qwen3-MoE) share their config.json
// reading and writing and their tensor list: hf_llama_style.hpp.
#include "hf/hf_family.hpp"
#include "hf/hf_llama_style.hpp"

namespace dtrain {
namespace {

using Json = HfJson;

// Whether the heads split the hidden size (no model.kv_channels of another size): GPT-2 and Qwen2
// config.json have no head_dim.
bool heads_split_hidden(const Config& c) { return c.head_dim() * c.model.num_attention_heads == c.model.hidden_size; }

HfFamily gpt2() {
  HfFamily f;
  f.architecture = "GPT2LMHeadModel";
  f.model_type = "gpt2";
  f.design = "LayerNorm, learned_absolute, GELU, multi-head attention, add_bias_linear=true";
  f.bare_prefix = "transformer.";  // files saved from GPT2Model (as the original gpt2 upload)
  f.keys = {{"n_layer", &ModelConfig::num_layers},
            {"n_embd", &ModelConfig::hidden_size},
            {"n_head", &ModelConfig::num_attention_heads},
            {"n_positions", &ModelConfig::seq_length},
            {"vocab_size", &ModelConfig::vocab_size},
            {"layer_norm_epsilon", &ModelConfig::norm_epsilon, false, 1e-5},
            {"tie_word_embeddings", &ModelConfig::untie_embeddings_and_output_weights, false, 1, true}};
  f.describes = [](const Config& c) {
    const ModelConfig& m = c.model;
    return m.normalization == Normalization::layernorm && m.position_embedding_type == PositionEmbedding::learned_absolute &&
           !m.swiglu && !m.group_query_attention && m.add_bias_linear && m.window_size == 0 && heads_split_hidden(c) &&
           m.num_experts == 0;
  };
  f.read = [](const HfConfigReader& r, ModelConfig& m) {
    m.ffn_hidden_size = r.integer("n_inner", 4 * m.hidden_size);
    const std::string act = r.text("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      throw r.error("'activation_function' = \"" + act + "\": dtrain's GPT-2 MLP uses GELU's tanh approximation (gelu_new)");
    r.require("scale_attn_weights", true, "dtrain scales attention scores by 1/sqrt(head_dim)");
    r.require("scale_attn_by_inverse_layer_idx", false, "dtrain does not scale attention by layer");
  };
  f.write = [](const Config& c, Json& j) {
    j["activation_function"] = "gelu_new";  // the tanh approximation, as dtrain's GELU
    j["attn_pdrop"] = j["embd_pdrop"] = j["resid_pdrop"] = 0.0;
    j["n_ctx"] = c.model.seq_length;
    j["n_inner"] = c.ffn_hidden();
    j["scale_attn_weights"] = true;
  };
  f.tensors = [](const ModelShape& s, std::vector<HfTensor>& out) {
    const std::int64_t C = s.hidden, F = s.ffn, V = s.vocab, T = s.seq_length;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape, std::string source, bool transpose = false) {
      out.push_back({std::move(name), std::move(shape), std::move(source), 0, 1, transpose});
    };
    add("transformer.wte.weight", {V, C}, "wte");
    add("transformer.wpe.weight", {T, C}, "wpe");
    for (int l = 0; l < s.num_layers; ++l) {
      const std::string h = "transformer.h." + std::to_string(l) + ".", d = "h" + std::to_string(l) + ".";
      add(h + "ln_1.weight", {C}, d + "ln1_w");
      add(h + "ln_1.bias", {C}, d + "ln1_b");
      add(h + "attn.c_attn.weight", {C, 3 * C}, d + "qkv_w", true);
      add(h + "attn.c_attn.bias", {3 * C}, d + "qkv_b");
      add(h + "attn.c_proj.weight", {C, C}, d + "proj_w", true);
      add(h + "attn.c_proj.bias", {C}, d + "proj_b");
      add(h + "ln_2.weight", {C}, d + "ln2_w");
      add(h + "ln_2.bias", {C}, d + "ln2_b");
      add(h + "mlp.c_fc.weight", {C, F}, d + "fc_w", true);
      add(h + "mlp.c_fc.bias", {F}, d + "fc_b");
      add(h + "mlp.c_proj.weight", {F, C}, d + "fcproj_w", true);
      add(h + "mlp.c_proj.bias", {C}, d + "fcproj_b");
    }
    add("transformer.ln_f.weight", {C}, "lnf_w");
    add("transformer.ln_f.bias", {C}, "lnf_b");
  };
  return f;
}

HfFamily llama() {
  HfFamily f;
  f.architecture = "LlamaForCausalLM";
  f.model_type = "llama";
  f.design = "RMSNorm, rope with rotary_percent=1, swiglu, window_size=0";
  f.bare_prefix = "";
  f.keys = {{"num_hidden_layers", &ModelConfig::num_layers},
            {"hidden_size", &ModelConfig::hidden_size},
            {"num_attention_heads", &ModelConfig::num_attention_heads},
            {"intermediate_size", &ModelConfig::ffn_hidden_size},
            {"max_position_embeddings", &ModelConfig::seq_length},
            {"vocab_size", &ModelConfig::vocab_size},
            {"rms_norm_eps", &ModelConfig::norm_epsilon, false, 1e-6},
            {"tie_word_embeddings", &ModelConfig::untie_embeddings_and_output_weights, false, 0, true}};
  f.describes = [](const Config& c) {
    return llama_style(c, false, false) && c.model.window_size == 0 && (c.model.add_bias_linear || !c.model.add_qkv_bias);
  };
  f.read = [](const HfConfigReader& r, ModelConfig& m) {
    read_llama_block(r, m);
    const bool attention_bias = r.flag("attention_bias", false), mlp_bias = r.flag("mlp_bias", false);
    if (attention_bias != mlp_bias)
      throw r.error("'attention_bias' and 'mlp_bias' differ; dtrain's model.add_bias_linear gives both layers biases or neither");
    m.add_bias_linear = attention_bias;
  };
  f.write = [](const Config& c, Json& j) {
    const ModelConfig& m = c.model;
    write_llama_block(c, j);
    j["attention_bias"] = j["mlp_bias"] = m.add_bias_linear;
    j["pretraining_tp"] = 1;
    j["rope_scaling"] = nullptr;
    if (m.rope_scaling == RopeScaling::llama3)
      j["rope_scaling"] = {{"factor", m.rope_scaling_factor},
                           {"high_freq_factor", m.rope_scaling_high_freq_factor},
                           {"low_freq_factor", m.rope_scaling_low_freq_factor},
                           {"original_max_position_embeddings", static_cast<long long>(m.rope_scaling_original_max_position_embeddings)},
                           {"rope_type", "llama3"}};
  };
  f.tensors = [](const ModelShape& s, std::vector<HfTensor>& out) { llama_style_tensors(s, out); };
  return f;
}

// Mistral's attention as config.json gives it (Mistral, Mixtral): the Llama block without biases or RoPE
// scaling, and the window (`absent_window` where config.json has no sliding_window: its class default).
void read_mistral_block(const HfConfigReader& r, ModelConfig& m, int absent_window) {
  read_llama_block(r, m);
  if (m.rope_scaling != RopeScaling::none) throw r.error("'rope_scaling' must be null: Mistral's attention scales no RoPE frequencies");
  m.add_bias_linear = false;
  read_sliding_window(r, m, absent_window);
}

// Mistral: Llama's tensors without biases; config.json's sliding_window is model.window_size (null: none;
// absent: MistralConfig's default, 4096), the keys a token sees, itself included (transformers' mask
// keeps key k for query q when q - k < sliding_window).
HfFamily mistral() {
  HfFamily f = llama();
  f.architecture = "MistralForCausalLM";
  f.model_type = "mistral";
  f.design = "RMSNorm, rope with rotary_percent=1 and no rope_scaling, swiglu, add_bias_linear=false, any window_size";
  f.describes = [](const Config& c) {
    return llama_style(c, false, false) && !c.model.add_bias_linear && !c.model.add_qkv_bias &&
           c.model.rope_scaling == RopeScaling::none;
  };
  f.read = [](const HfConfigReader& r, ModelConfig& m) { read_mistral_block(r, m, 4096); };
  f.write = [](const Config& c, Json& j) {
    write_llama_block(c, j);
    j["sliding_window"] = c.model.window_size > 0 ? Json(c.model.window_size) : Json(nullptr);
  };
  return f;
}

// The Qwen block as config.json gives it (Qwen2, Qwen3): the Llama block with plain RoPE (their YaRN and
// dynamic scalings are not implemented) and no sliding window (Qwen's use_sliding_window windows only
// the layers from max_window_layers on; dtrain's model.window_size is the same on every layer).
void read_qwen_block(const HfConfigReader& r, ModelConfig& m) {
  read_llama_block(r, m);
  if (m.rope_scaling != RopeScaling::none)
    throw r.error("'rope_scaling' = llama3: dtrain reads Qwen with plain RoPE (its YaRN and dynamic scalings are not implemented)");
  if (r.flag("use_sliding_window", false))
    throw r.error("'use_sliding_window' = true: Qwen then windows only the layers from 'max_window_layers' on, and dtrain's "
                  "model.window_size is the same on every layer");
  m.add_bias_linear = false;
}
// And written as Qwen2Config and Qwen3Config write it.
void write_qwen_block(const Config& c, Json& j) {
  write_llama_block(c, j);
  j["max_window_layers"] = 28;  // their classes' default; without use_sliding_window it changes nothing
  j["rope_scaling"] = nullptr;
  j["sliding_window"] = nullptr;
  j["use_sliding_window"] = false;
}

// Qwen2 (and Qwen2.5): Llama's blocks with biases on the query, key and value projections only
// (model.add_qkv_bias); config.json as Qwen2Config writes it (no head_dim: heads split the hidden size).
// Its per-layer sliding window (use_sliding_window, above max_window_layers) is refused.
HfFamily qwen2() {
  HfFamily f = llama();
  f.architecture = "Qwen2ForCausalLM";
  f.model_type = "qwen2";
  f.design = "RMSNorm, rope with rotary_percent=1 and no rope_scaling, swiglu, add_bias_linear=false, add_qkv_bias=true";
  f.describes = [](const Config& c) {
    const ModelConfig& m = c.model;
    return llama_style(c, false, false) && !m.add_bias_linear && m.add_qkv_bias && m.window_size == 0 &&
           m.rope_scaling == RopeScaling::none && heads_split_hidden(c);
  };
  f.read = [](const HfConfigReader& r, ModelConfig& m) {
    read_qwen_block(r, m);
    m.add_qkv_bias = true;
  };
  f.write = [](const Config& c, Json& j) {
    write_qwen_block(c, j);
    j.erase("head_dim");  // not a Qwen2Config key
  };
  return f;
}

// Qwen3 (dense): Llama's blocks without biases, with qk_layernorm and usually a head_dim of its own
// (model.kv_channels); config.json as Qwen3Config writes it. Its attention_bias (biases on q, k, v and o
// but not the MLP: no dtrain key says that) and per-layer sliding window are refused.
HfFamily qwen3() {
  HfFamily f = llama();
  f.architecture = "Qwen3ForCausalLM";
  f.model_type = "qwen3";
  f.design = "RMSNorm, rope with rotary_percent=1 and no rope_scaling, swiglu, add_bias_linear=false, qk_layernorm=true";
  f.describes = [](const Config& c) {
    const ModelConfig& m = c.model;
    return llama_style(c, true, false) && !m.add_bias_linear && !m.add_qkv_bias && m.window_size == 0 &&
           m.rope_scaling == RopeScaling::none;
  };
  f.read = [](const HfConfigReader& r, ModelConfig& m) {
    read_qwen_block(r, m);
    r.require("attention_bias", false,
              "Qwen3's attention_bias puts biases on q, k, v and o but not the MLP, which no dtrain key describes");
    m.qk_layernorm = true;
  };
  f.write = [](const Config& c, Json& j) {
    write_qwen_block(c, j);
    j["attention_bias"] = false;
  };
  return f;
}

// Mixtral: Mistral's attention with every MLP a mixture of experts (block_sparse_moe: gate.weight (E,C) =
// h<l>.router_w; experts.<e>.w1/w3.weight (F',C) = blocks 2e, 2e+1 of expert_fc_w, the gate and up rows;
// experts.<e>.w2.weight (C,F') = block e of expert_fcproj_w), top-k renormalised
// (model.moe_router_pre_softmax = false); config.json's intermediate_size is the experts' width.
HfFamily mixtral() {
  HfFamily f = mistral();
  f.architecture = "MixtralForCausalLM";
  f.model_type = "mixtral";
  f.design = "RMSNorm, rope, swiglu, add_bias_linear=false, num_experts > 0 in every block (moe_layer_freq=1), "
             "moe_router_pre_softmax=false";
  f.keys = {{"num_hidden_layers", &ModelConfig::num_layers},
            {"hidden_size", &ModelConfig::hidden_size},
            {"num_attention_heads", &ModelConfig::num_attention_heads},
            {"intermediate_size", &ModelConfig::moe_ffn_hidden_size},
            {"num_local_experts", &ModelConfig::num_experts},
            {"num_experts_per_tok", &ModelConfig::moe_router_topk},
            {"max_position_embeddings", &ModelConfig::seq_length},
            {"vocab_size", &ModelConfig::vocab_size},
            {"rms_norm_eps", &ModelConfig::norm_epsilon, false, 1e-5},
            {"router_aux_loss_coef", &ModelConfig::moe_aux_loss_coeff, false, 0.001},
            {"tie_word_embeddings", &ModelConfig::untie_embeddings_and_output_weights, false, 0, true}};
  f.describes = [](const Config& c) {
    const ModelConfig& m = c.model;
    return llama_style(c, false, true) && m.moe_layer_freq == 1 && m.moe_layer_pattern.empty() && !m.moe_router_pre_softmax && !m.add_bias_linear &&
           !m.add_qkv_bias && m.rope_scaling == RopeScaling::none;
  };
  f.read = [](const HfConfigReader& r, ModelConfig& m) {
    read_mistral_block(r, m, 0);  // MixtralConfig's default window: none
    r.require("router_jitter_noise", 0.0, "dtrain's router adds no noise to its logits");
    m.moe_layer_freq = 1;
    m.moe_router_pre_softmax = false;
  };
  f.write = [write = f.write](const Config& c, Json& j) {
    write(c, j);
    j["intermediate_size"] = c.moe_ffn_hidden();  // the experts' width (the Llama block wrote the dense MLP's)
    j["output_router_logits"] = false;
    j["router_jitter_noise"] = 0.0;
  };
  f.tensors = [](const ModelShape& s, std::vector<HfTensor>& out) {
    llama_style_tensors(s, out, {"block_sparse_moe.", "w1", "w3", "w2"});
  };
  return f;
}

// Qwen3-MoE: Qwen3's attention (qk_layernorm, head_dim) with every MLP a mixture of experts (mlp.gate.weight
// (E,C) = h<l>.router_w; mlp.experts.<e>.gate_proj/up_proj.weight (F',C) = blocks 2e, 2e+1 of
// expert_fc_w; down_proj.weight (C,F') = block e of expert_fcproj_w); norm_topk_prob is
// !model.moe_router_pre_softmax, moe_intermediate_size the experts' width. Its decoder_sparse_step and
// mlp_only_layers place the MoE layers as modeling_qwen3_moe does (layer l is sparse when it is not in
// mlp_only_layers and (l + 1) % decoder_sparse_step == 0): dtrain's model.moe_layer_pattern, written back
// as decoder_sparse_step 1 and the dense layers in mlp_only_layers; the dense layers' width is
// intermediate_size (model.ffn_hidden_size).
HfFamily qwen3_moe() {
  HfFamily f = qwen3();
  f.architecture = "Qwen3MoeForCausalLM";
  f.model_type = "qwen3_moe";
  f.design = "Qwen3's attention (qk_layernorm), swiglu, add_bias_linear=false, num_experts > 0 (any moe_layer_freq or moe_layer_pattern)";
  f.keys = {{"num_hidden_layers", &ModelConfig::num_layers},
            {"hidden_size", &ModelConfig::hidden_size},
            {"num_attention_heads", &ModelConfig::num_attention_heads},
            {"moe_intermediate_size", &ModelConfig::moe_ffn_hidden_size},
            {"intermediate_size", &ModelConfig::ffn_hidden_size, false, 0},
            {"num_experts", &ModelConfig::num_experts},
            {"num_experts_per_tok", &ModelConfig::moe_router_topk},
            {"max_position_embeddings", &ModelConfig::seq_length},
            {"vocab_size", &ModelConfig::vocab_size},
            {"rms_norm_eps", &ModelConfig::norm_epsilon, false, 1e-6},
            {"router_aux_loss_coef", &ModelConfig::moe_aux_loss_coeff, false, 0.001},
            {"tie_word_embeddings", &ModelConfig::untie_embeddings_and_output_weights, false, 0, true}};
  f.describes = [](const Config& c) {
    const ModelConfig& m = c.model;
    return llama_style(c, true, true) && !m.add_bias_linear && !m.add_qkv_bias && m.window_size == 0 && m.rope_scaling == RopeScaling::none;
  };
  f.read = [read = f.read](const HfConfigReader& r, ModelConfig& m) {
    read(r, m);  // Qwen3's: the attention, its norms, no biases
    const int step = r.integer("decoder_sparse_step", 1);
    if (step < 1) throw r.error("'decoder_sparse_step' is " + std::to_string(step) + ", not a step of at least 1");
    const HfJson& j = r.json();
    std::string flags(static_cast<std::size_t>(m.num_layers), '1');
    for (int l = 0; l < m.num_layers; ++l)
      if ((l + 1) % step != 0) flags[static_cast<std::size_t>(l)] = '0';
    if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
      if (!j["mlp_only_layers"].is_array()) throw r.error("'mlp_only_layers' is not a list of layer indices");
      for (const HfJson& l : j["mlp_only_layers"]) {
        if (!l.is_number_integer() || l.get<long>() < 0 || l.get<long>() >= m.num_layers)
          throw r.error("'mlp_only_layers' holds " + l.dump() + ", not a layer index below num_hidden_layers=" + std::to_string(m.num_layers));
        flags[l.get<std::size_t>()] = '0';
      }
    }
    if (flags.find('1') == std::string::npos) throw r.error("'decoder_sparse_step' and 'mlp_only_layers' leave no layer a mixture of experts");
    m.moe_layer_freq = 1;
    m.moe_layer_pattern = flags.find('0') == std::string::npos ? std::string() : flags;
    m.moe_router_pre_softmax = !r.flag("norm_topk_prob", false);
  };
  f.write = [write = f.write](const Config& c, Json& j) {
    write(c, j);
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = Json::array();
    for (int l = 0; l < c.model.num_layers; ++l)
      if (!c.model.moe_layer(l)) j["mlp_only_layers"].push_back(l);
    j["norm_topk_prob"] = !c.model.moe_router_pre_softmax;
    j["output_router_logits"] = false;
  };
  return f;
}

}  // namespace

const std::vector<HfFamily>& hf_families() {
  static const std::vector<HfFamily> families = {gpt2(), llama(), mistral(), qwen2(), qwen3(), mixtral(), qwen3_moe()};
  return families;
}

}  // namespace dtrain
