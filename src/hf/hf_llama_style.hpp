// What the Llama-style Hugging Face families (hf_families.cpp: Llama, Mistral, Qwen2, Qwen3, Mixtral,
// Qwen3-MoE) share: their config.json's Llama block and their tensor list.
// Llama (LlamaForCausalLM: RMSNorm, RoPE over whole heads, SwiGLU, no positions table; biases optional),
// Mistral (MistralForCausalLM: Llama's blocks and tensors without biases, and a sliding window), Qwen2
// (Qwen2ForCausalLM: Llama's blocks and tensors with biases on q_proj, k_proj and v_proj only) and Qwen3
// (Qwen3ForCausalLM: Llama's without biases, head_dim of its own, self_attn.q_norm/k_norm.weight (HD) =
// h<l>.qnorm_w, knorm_w: RMSNorm of each head's queries and keys before RoPE):
//   model.embed_tokens.weight = wte; model.layers.<l>.input_layernorm.weight = ln1_w
//   self_attn.q_proj.weight (NH*HD,C) = q_w, or block 0 of qkv_w; k_proj/v_proj (G*HD,C) = blocks of kv_w
//   (or blocks 1, 2 of qkv_w); o_proj.weight = proj_w; post_attention_layernorm.weight = ln2_w;
//   mlp.gate_proj/up_proj (F,C) = blocks 0, 1 of fc_w; mlp.down_proj (C,F) = fcproj_w; model.norm.weight
//   = lnf_w; lm_head.weight = lm_head (untied). dtrain's RoPE rotates pairs (i, i + HD/2) of each head,
//   which is the layout of Hugging Face's q_proj/k_proj (rotate_half), so no rows are permuted.
#pragma once
#include <vector>

#include "hf/hf_family.hpp"

namespace dtrain {

// RoPE of a Llama config.json: theta from rope_theta (transformers 4) or rope_parameters.rope_theta
// (transformers 5); the scaling from rope_scaling or rope_parameters (rope_type, or the older "type"):
// "default" (plain RoPE) or "llama3" (Llama 3.1's remapping, with its four numbers), nothing else.
// Both given must agree.
void read_rope(const HfConfigReader& r, ModelConfig& m);

// The Llama block as config.json gives it: grouped-query heads, RMSNorm, RoPE over whole heads, SwiGLU
// with silu, head_dim (model.kv_channels where the heads do not split the hidden size).
void read_llama_block(const HfConfigReader& r, ModelConfig& m);
// config.json's keys of the Llama block that every such family writes alike.
void write_llama_block(const Config& c, HfJson& j);

// Whether the model has the Llama-style block: RMSNorm, RoPE over whole heads, SwiGLU; with the heads'
// query/key norms exactly when qk_norm (Qwen3), and MoE blocks exactly when moe; every block with the
// same attention (no window_attn_skip_freq).
bool llama_style(const Config& c, bool qk_norm, bool moe);

// model.window_size from config.json's sliding_window: null is no window, a missing key `absent` (the
// family's config class default: Mistral's 4096, Mixtral's none).
void read_sliding_window(const HfConfigReader& r, ModelConfig& m, int absent);

// The tensors of a Llama-style model: the embedding, per layer the attention (q, k, v biases with
// s.qkv_bias, o's with s.bias; Qwen3's q_norm and k_norm with s.qk_norm) and the MLP, the final norm. The
// MLP of a MoE layer: the router `<prefix>gate.weight` and each expert's `<prefix>experts.<e>.<gate|up|
// down>.weight`, named by `moe` (Mixtral's w1, w3, w2; Qwen3-MoE's gate_proj, up_proj, down_proj); of a
// dense layer Llama's mlp.gate_proj, up_proj, down_proj (and their biases with s.bias).
struct MoeNames {
  const char* prefix;  // after "model.layers.<l>."
  const char* gate;    // an expert's gate rows (block 2e of expert_fc_w)
  const char* up;      // its up rows (block 2e + 1)
  const char* down;    // its output projection (block e of expert_fcproj_w)
};
void llama_style_tensors(const ModelShape& s, std::vector<HfTensor>& out,
                         const MoeNames& moe = {"mlp.", "gate_proj", "up_proj", "down_proj"});

}  // namespace dtrain
