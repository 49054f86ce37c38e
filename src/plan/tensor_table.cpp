// Builds the tensor table of a rank from the model shape, its pipeline part and its TP coordinate.
#include "plan/tensor_table.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "plan/buckets.hpp"
#include "plan/frozen_tensors.hpp"

namespace dtrain {

ModelShape ModelShape::from(const Config& c) {
  const ModelConfig& m = c.model;
  ModelShape s{m.num_layers, m.hidden_size, m.num_attention_heads, c.ffn_hidden(), m.seq_length, m.vocab_size, m.kv_heads()};
  s.rmsnorm = m.normalization == Normalization::rmsnorm;
  s.rope = m.position_embedding_type == PositionEmbedding::rope;
  s.swiglu = m.swiglu;
  s.tied = !m.untie_embeddings_and_output_weights;
  s.bias = m.add_bias_linear;
  s.qkv_bias = m.add_bias_linear || m.add_qkv_bias;
  s.norm_eps = static_cast<float>(m.norm_epsilon);
  kernels::RopeFrequencies& f = s.rope_frequencies;
  f.base = static_cast<float>(m.rotary_base);
  if (s.rope && m.rope_scaling == RopeScaling::llama3) {
    f.factor = static_cast<float>(m.rope_scaling_factor);
    f.low_freq_factor = static_cast<float>(m.rope_scaling_low_freq_factor);
    f.high_freq_factor = static_cast<float>(m.rope_scaling_high_freq_factor);
    f.original_context = static_cast<float>(m.rope_scaling_original_max_position_embeddings);
  }
  s.rotary_dim = s.rope ? c.rotary_dims() : 0;
  s.window = m.window_size;
  s.window_skip = m.window_attn_skip_freq;
  s.hd = c.head_dim();
  s.qk_norm = m.qk_layernorm;
  s.experts = m.num_experts;
  s.moe_ffn = m.num_experts > 0 ? c.moe_ffn_hidden() : 0;
  for (int l = 0; l < m.num_layers; ++l) s.moe_blocks += m.moe_layer(l) ? '1' : '0';
  s.topk = m.num_experts > 0 ? m.moe_router_topk : 0;
  s.moe_aux_coeff = m.moe_router_load_balancing_type == MoeLoadBalancing::aux_loss ? m.moe_aux_loss_coeff : 0.0;
  s.capacity_factor = m.moe_capacity_factor.set ? m.moe_capacity_factor.value : 0.0;
  s.moe_renormalize = m.num_experts > 0 && !m.moe_router_pre_softmax;
  s.frozen = freeze_patterns(c.training.freeze);
  return s;
}

long global_index(const TensorSpec& t, long i) {
  const int dims = static_cast<int>(t.local_shape.size());
  long g = 0, stride = 1;
  for (int d = dims - 1; d >= 0; --d) {
    const long coord = i % t.local_shape[d] + t.local_offset[d];
    i /= t.local_shape[d];
    g += coord * stride;
    stride *= t.global_shape[d];
  }
  return g;
}


std::vector<int> StagePart::layers() const {
  std::vector<int> all;
  for (const auto& c : chunks) all.insert(all.end(), c.begin(), c.end());
  return all;
}

StagePart stage_part(const PipelineSplit& split, int stage) {
  StagePart part;
  part.chunks.resize(static_cast<std::size_t>(split.v));
  for (int c = 0; c < split.v; ++c)
    for (int i = 0; i < split.chunk_blocks(stage); ++i) part.chunks[static_cast<std::size_t>(c)].push_back(split.chunk_begin(stage, c) + i);
  part.embedding = stage == 0;
  part.head = stage == split.head_stage();
  return part;
}

TensorTable::TensorTable(const ModelShape& s, const StagePart& part, int tp_size, int tp_rank, std::size_t bucket_alignment,
                         int ep_size, int ep_rank)
    : tp_size_(tp_size), tp_rank_(tp_rank), ep_size_(ep_size), ep_rank_(ep_rank), bucket_alignment_(bucket_alignment) {
  const long C = s.hidden, F = s.ffn, V = s.vocab, T = s.seq_length, HD = s.head_dim();
  const float std_w = 0.02f;
  // GPT-2: residual-stream projections scaled by 1/sqrt(2 * layers).
  const float std_res = 0.02f / std::sqrt(2.0f * static_cast<float>(s.num_layers));
  if (part.embedding || (part.head && s.tied)) add("wte", {V, C}, 0, -1, true, InitKind::normal, std_w);
  if (part.embedding && !s.rope) add("wpe", {T, C}, -1, -1, true, InitKind::normal, 0.01f);
  // A norm's weight and (LayerNorm) bias.
  auto norm = [&](const std::string& name, int layer) {
    add(name + "_w", {C}, -1, layer, false, InitKind::ones, 0);
    if (!s.rmsnorm) add(name + "_b", {C}, -1, layer, false, InitKind::zeros, 0);
  };
  for (int l : part.layers()) {
    const std::string p = "h" + std::to_string(l) + ".";
    norm(p + "ln1", l);
    if (s.grouped()) {
      const long G = s.kv_heads;
      add(p + "q_w", {s.heads * HD, C}, 0, l, true, InitKind::normal, std_w);
      add(p + "kv_w", {2, G * HD, C}, 1, l, true, InitKind::normal, std_w, true);
      if (s.qkv_bias) {
        add(p + "q_b", {s.heads * HD}, 0, l, false, InitKind::zeros, 0);
        add(p + "kv_b", {2, G * HD}, 1, l, false, InitKind::zeros, 0, true);
      }
    } else {
      add(p + "qkv_w", {3, s.heads * HD, C}, 1, l, true, InitKind::normal, std_w);
      if (s.qkv_bias) add(p + "qkv_b", {3, s.heads * HD}, 1, l, false, InitKind::zeros, 0);
    }
    if (s.qk_norm) {
      add(p + "qnorm_w", {HD}, -1, l, false, InitKind::ones, 0);
      add(p + "knorm_w", {HD}, -1, l, false, InitKind::ones, 0);
    }
    add(p + "proj_w", {C, s.heads * HD}, 1, l, true, InitKind::normal, std_res);
    if (s.bias) add(p + "proj_b", {C}, -1, l, false, InitKind::zeros, 0);
    norm(p + "ln2", l);
    if (s.moe(l)) {
      add_moe(s, p, l, std_w, std_res);
      continue;
    }
    if (s.swiglu) {
      add(p + "fc_w", {2, F, C}, 1, l, true, InitKind::normal, std_w);
      if (s.bias) add(p + "fc_b", {2, F}, 1, l, false, InitKind::zeros, 0);
    } else {
      add(p + "fc_w", {F, C}, 0, l, true, InitKind::normal, std_w);
      if (s.bias) add(p + "fc_b", {F}, 0, l, false, InitKind::zeros, 0);
    }
    add(p + "fcproj_w", {C, F}, 1, l, true, InitKind::normal, std_res);
    if (s.bias) add(p + "fcproj_b", {C}, -1, l, false, InitKind::zeros, 0);
  }
  if (part.head) {
    norm("lnf", -1);
    if (!s.tied) add("lm_head", {V, C}, 0, -1, true, InitKind::normal, std_w);
  }
  place(s.frozen);
}

void TensorTable::place(const std::vector<std::string>& frozen) {
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    TensorSpec& t = tensors_[i];
    t.trainable = !frozen_by(frozen, t.name);
    if (packed_[i] && t.trainable != tensors_[i - 1].trainable)
      throw UserError("training.freeze: " + t.name + " is one weight with " + tensors_[i - 1].name + "; freeze both or neither");
  }
  const bool any_frozen = std::any_of(tensors_.begin(), tensors_.end(), [](const TensorSpec& t) { return !t.trainable; });
  // 16-float (64-byte) alignment keeps every tensor on its own cache line for SIMD kernels; a new
  // group (another layer) starts a new gradient bucket.
  total_ = 0;
  const TensorSpec* previous = nullptr;
  for (const bool trainable : {true, false}) {
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      TensorSpec& t = tensors_[i];
      if (t.trainable != trainable) continue;
      const bool new_group = previous && (bucket_layer(*previous) != bucket_layer(t) || previous->expert != t.expert);
      const std::size_t align = packed_[i] ? 1 : new_group ? bucket_alignment_ : 16;
      total_ = (total_ + align - 1) / align * align;
      t.offset = total_;
      total_ += t.numel;
      previous = &t;
    }
    if (!trainable) break;
    trainable_total_ = total_;
    if (!any_frozen) break;
    total_ = (total_ + bucket_alignment_ - 1) / bucket_alignment_ * bucket_alignment_;  // the frozen ones after the buckets
    previous = nullptr;
  }
}

void TensorTable::add_moe(const ModelShape& s, const std::string& p, int l, float std_w, float std_res) {
  const long E = s.experts, C = s.hidden, F = s.moe_ffn;
  add(p + "router_w", {E, C}, -1, l, true, InitKind::normal, std_w);
  if (s.swiglu) {
    add(p + "expert_fc_w", {E, 2, F, C}, 2, l, true, InitKind::normal, std_w, false, true);
    if (s.bias) add(p + "expert_fc_b", {E, 2, F}, 2, l, false, InitKind::zeros, 0, false, true);
  } else {
    add(p + "expert_fc_w", {E, F, C}, 1, l, true, InitKind::normal, std_w, false, true);
    if (s.bias) add(p + "expert_fc_b", {E, F}, 1, l, false, InitKind::zeros, 0, false, true);
  }
  add(p + "expert_fcproj_w", {E, C, F}, 2, l, true, InitKind::normal, std_res, false, true);
  if (s.bias) add(p + "expert_fcproj_b", {E, C}, -1, l, false, InitKind::zeros, 0, false, true);
}

void TensorTable::add(std::string name, std::vector<long> shape, int split_dim, int layer, bool decay,
                      InitKind init, float std, bool packed, bool expert) {
  TensorSpec t;
  t.name = std::move(name);
  t.global_shape = shape;
  t.split_dim = tp_size_ > 1 ? split_dim : -1;
  t.local_shape = shape;
  t.local_offset.assign(shape.size(), 0);
  t.expert = expert;
  if (expert) {  // whole experts per expert-parallel rank
    if (shape[0] % ep_size_ != 0)
      throw UserError(t.name + ": model.num_experts=" + std::to_string(shape[0]) +
                      " is not divisible by system.expert_model_parallel_size=" + std::to_string(ep_size_));
    t.local_shape[0] = shape[0] / ep_size_;
    t.local_offset[0] = ep_rank_ * t.local_shape[0];
  }
  if (t.split_dim >= 0) {
    const long full = shape[t.split_dim];
    if (full % tp_size_ != 0)
      throw UserError(t.name + ": dimension " + std::to_string(full) + " is not divisible by tensor_model_parallel_size=" +
                      std::to_string(tp_size_));
    t.local_shape[t.split_dim] = full / tp_size_;
    t.local_offset[t.split_dim] = tp_rank_ * (full / tp_size_);
  }
  t.layer = layer;
  t.weight_decay = decay;
  t.init = init;
  t.init_std = std;
  t.numel = 1;
  for (long d : t.local_shape) t.numel *= static_cast<std::size_t>(d);
  tensors_.push_back(std::move(t));
  packed_.push_back(packed ? 1 : 0);
}

const TensorSpec* TensorTable::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorSpec& TensorTable::get(const std::string& name) const {
  const TensorSpec* t = find(name);
  if (!t) fatal("tensor '" + name + "' is not held by this rank");
  return *t;
}

}  // namespace dtrain
