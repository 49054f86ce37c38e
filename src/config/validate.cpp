// validate_config: every key on its own (ranges, bounds, finite numbers) and the model's own shape.
#include "config/validate.hpp"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/tokenizer_spec.hpp"
#include "kernels/flash_tiling.hpp"

namespace dtrain {
namespace {

std::string s(long v) { return std::to_string(v); }
std::string s(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

class Problems {
 public:
  void add(const std::string& line) { lines_.push_back(line); }
  // An integer key within [lo, hi].
  void range(const char* key, long v, long lo, long hi, const char* meaning = "") {
    if (v < lo || v > hi)
      add(std::string(key) + "=" + s(v) + " must be between " + s(lo) + " and " + s(hi) + (*meaning ? " (" : "") + meaning +
          (*meaning ? ")" : ""));
  }
  // A finite real number within [lo, hi] (open ends where asked).
  void real(const char* key, double v, double lo, double hi, bool open_lo, bool open_hi, const char* meaning) {
    const bool ok = std::isfinite(v) && (open_lo ? v > lo : v >= lo) && (open_hi ? v < hi : v <= hi);
    if (!ok) add(std::string(key) + "=" + s(v) + " must be " + meaning);
  }
  void throw_if_any() const {
    if (lines_.empty()) return;
    std::string all;
    for (const auto& e : lines_) all += (all.empty() ? "" : "\n") + e;
    throw UserError(all);
  }

 private:
  std::vector<std::string> lines_;
};

// The mixture-of-experts keys (checked only with num_experts >= 1; the dense model ignores them).
void validate_moe(Problems& p, const Config& c) {
  const auto& m = c.model;
  p.range("model.num_experts", m.num_experts, 0, kMaxExperts, "0 = dense MLP");
  if (m.num_experts < 1) return;
  p.range("model.moe_router_topk", m.moe_router_topk, 1, m.num_experts, "experts per token, at most model.num_experts");
  p.range("model.moe_ffn_hidden_size", m.moe_ffn_hidden_size, 0, kMaxFfn, "0 = ffn_hidden_size");
  p.range("model.moe_layer_freq", m.moe_layer_freq, 1, kMaxLayers, "1 = every block");
  if (!m.moe_layer_pattern.empty()) {
    const std::string flags = ModelConfig::moe_pattern_flags(m.moe_layer_pattern);
    if (m.moe_layer_pattern.find_first_not_of("01[], ") != std::string::npos || static_cast<int>(flags.size()) != m.num_layers ||
        flags.find('1') == std::string::npos)
      p.add("model.moe_layer_pattern=" + m.moe_layer_pattern + " is not one 0 or 1 per block (model.num_layers=" +
            s(static_cast<long>(m.num_layers)) + ") with at least one 1; e.g. [" + std::string(m.num_layers > 1 ? "0," : "") + "1] for " +
            (m.num_layers > 1 ? "a MoE block after a dense one" : "one MoE block"));
    if (m.moe_layer_freq != 1)
      p.add("model.moe_layer_pattern and model.moe_layer_freq=" + s(static_cast<long>(m.moe_layer_freq)) +
            " both place the MoE blocks; give one of them");
  }
  p.real("model.moe_aux_loss_coeff", m.moe_aux_loss_coeff, 0, 1e9, false, false, "a finite number >= 0 (e.g. 1e-2)");
  if (m.moe_capacity_factor.set) {
    p.real("model.moe_capacity_factor", m.moe_capacity_factor.value, 0, 1e6, true, false, "> 0 (e.g. 1.25), or none for dropless");
    if (c.system.context_parallel_size > 1)
      p.add("model.moe_capacity_factor=" + s(m.moe_capacity_factor.value) + " drops tokens per micro-batch, which context "
            "parallelism (system.context_parallel_size=" + s(static_cast<long>(c.system.context_parallel_size)) +
            ") splits over ranks; use moe_capacity_factor=none (dropless) with context parallelism");
  }
}

}  // namespace

std::string divisor_list(long n) {
  std::string out;
  for (long d = 1; d <= n && d <= 1 << 20; ++d)
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

void validate_config(const Config& c) {
  Problems p;
  const auto& m = c.model;
  p.range("model.num_layers", m.num_layers, 1, kMaxLayers);
  p.range("model.hidden_size", m.hidden_size, 1, kMaxHidden);
  p.range("model.num_attention_heads", m.num_attention_heads, 1, kMaxHidden);
  p.range("model.ffn_hidden_size", m.ffn_hidden_size, 0, kMaxFfn, "0 = 4 * hidden_size");
  p.range("model.seq_length", m.seq_length, 1, kMaxSeqLength);
  p.range("model.vocab_size", m.vocab_size, 1, kMaxVocab);
  p.range("model.global_batch_size", m.global_batch_size, 1, kMaxGlobalBatch);
  if (!m.micro_batch_size.automatic && m.micro_batch_size.value > m.global_batch_size)
    p.add("model.micro_batch_size=" + s(m.micro_batch_size.value) + " is larger than model.global_batch_size=" +
          s(static_cast<long>(m.global_batch_size)));
  validate_moe(p, c);
  // The checks between keys only where each key is in its range: an out-of-range value is one error, not two.
  const bool heads_in_range = m.hidden_size >= 1 && m.hidden_size <= kMaxHidden && m.num_attention_heads >= 1 &&
                              m.num_attention_heads <= kMaxHidden;
  p.range("model.kv_channels", m.kv_channels, 0, kMaxHidden);
  if (m.qk_layernorm && m.position_embedding_type != PositionEmbedding::rope)
    p.add("model.qk_layernorm=true needs model.position_embedding_type=rope: the queries and keys are normalised before they "
          "are rotated (Qwen3); set position_embedding_type=rope or qk_layernorm=false");
  if (m.qk_layernorm && m.normalization != Normalization::rmsnorm)
    p.add("model.qk_layernorm=true normalises each head with RMSNorm; set model.normalization=RMSNorm (the model's norms and the "
          "heads' are the same kind)");
  if (heads_in_range && m.kv_channels == 0 && m.hidden_size % m.num_attention_heads != 0)
    p.add("model.hidden_size=" + s(static_cast<long>(m.hidden_size)) + " is not divisible by model.num_attention_heads=" +
          s(static_cast<long>(m.num_attention_heads)) + "; use a head count among: " + divisor_list(m.hidden_size));

  p.real("model.norm_epsilon", m.norm_epsilon, 0, 1, true, false, "a small number > 0 (e.g. 1e-5)");
  p.range("model.recompute_num_layers", m.recompute_num_layers, 1, kMaxLayers);
  p.real("model.rotary_base", m.rotary_base, 1, 1e12, false, false, "a number > 1 (e.g. 10000)");
  p.real("model.rotary_percent", m.rotary_percent, 0, 1, true, false, "in (0, 1]");
  p.range("model.window_size", m.window_size, 0, kMaxSeqLength);
  p.range("model.window_attn_skip_freq", m.window_attn_skip_freq, 0, kMaxLayers, "0 = every block windowed");
  if (m.window_attn_skip_freq > 0 && m.window_size == 0)
    p.add("model.window_attn_skip_freq=" + s(static_cast<long>(m.window_attn_skip_freq)) +
          " chooses the blocks without a sliding window, but model.window_size=0 gives none a window; set model.window_size");
  if (m.window_size > m.seq_length && m.seq_length >= 1)
    p.add("model.window_size=" + s(static_cast<long>(m.window_size)) + " is larger than model.seq_length=" + s(static_cast<long>(m.seq_length)) +
          ": no token has that many keys; give a window of at most " + s(static_cast<long>(m.seq_length)) +
          ", or 0 for full causal attention");
  if (m.rope_scaling == RopeScaling::llama3) {
    p.real("model.rope_scaling_factor", m.rope_scaling_factor, 1, 1e6, false, false, "a number >= 1 (Llama 3.1: 8)");
    p.real("model.rope_scaling_low_freq_factor", m.rope_scaling_low_freq_factor, 0, 1e6, true, false, "a number > 0 (Llama 3.1: 1)");
    p.real("model.rope_scaling_high_freq_factor", m.rope_scaling_high_freq_factor, 0, 1e6, true, false, "a number > 0 (Llama 3.1: 4)");
    p.real("model.rope_scaling_original_max_position_embeddings", m.rope_scaling_original_max_position_embeddings, 1, 1e9, false,
           false, "a length >= 1 (Llama 3.1: 8192)");
    if (!(m.rope_scaling_high_freq_factor > m.rope_scaling_low_freq_factor))
      p.add("model.rope_scaling_high_freq_factor=" + s(m.rope_scaling_high_freq_factor) + " must exceed model.rope_scaling_low_freq_factor=" +
            s(m.rope_scaling_low_freq_factor) + " (Llama 3.1: 4 and 1)");
    if (m.position_embedding_type != PositionEmbedding::rope)
      p.add("model.rope_scaling=llama3 needs model.position_embedding_type=rope");
  }
  if (m.group_query_attention) {
    p.range("model.num_query_groups", m.num_query_groups, 1, kMaxHidden);
    if (m.num_query_groups >= 1 && m.num_query_groups <= kMaxHidden && heads_in_range && m.num_attention_heads % m.num_query_groups != 0)
      p.add("model.num_query_groups=" + s(static_cast<long>(m.num_query_groups)) + " does not divide model.num_attention_heads=" +
            s(static_cast<long>(m.num_attention_heads)) + "; use one of: " + divisor_list(m.num_attention_heads));
  }
  if (m.position_embedding_type == PositionEmbedding::rope && heads_in_range && (m.kv_channels > 0 || m.hidden_size % m.num_attention_heads == 0) &&
      c.rotary_dims() % 2 != 0)
    p.add("model.rotary_percent=" + s(m.rotary_percent) + " rotates " + s(static_cast<long>(c.rotary_dims())) +
          " dims of each head; RoPE turns pairs, so it must be an even number");

  const auto& y = c.system;
  p.range("system.tensor_model_parallel_size", y.tensor_model_parallel_size, 1, kMaxRanks);
  p.range("system.pipeline_model_parallel_size", y.pipeline_model_parallel_size, 1, kMaxRanks);
  p.range("system.virtual_pipeline_model_parallel_size", y.virtual_pipeline_model_parallel_size, 1, kMaxLayers);
  p.range("system.pipeline_first_stage_layers", y.pipeline_first_stage_layers, 0, kMaxLayers);
  p.range("system.pipeline_last_stage_layers", y.pipeline_last_stage_layers, 0, kMaxLayers);
  p.range("system.context_parallel_size", y.context_parallel_size, 1, kMaxRanks);
  if (y.context_parallel_size > 1 && m.seq_length % (2L * y.context_parallel_size) != 0)
    p.add("system.context_parallel_size=" + s(static_cast<long>(y.context_parallel_size)) + " cuts every sequence into 2 x " +
          s(static_cast<long>(y.context_parallel_size)) + " chunks (two per rank, for balanced causal attention), so it must divide " +
          "model.seq_length/2=" + s(static_cast<long>(m.seq_length) / 2) + (m.seq_length % 2 ? " (seq_length is odd)" : "") +
          (m.seq_length >= 2 ? "; choose cp among: " + divisor_list(m.seq_length / 2) : std::string()));
  p.range("system.expert_model_parallel_size", y.expert_model_parallel_size, 1, kMaxRanks);
  if (y.expert_model_parallel_size > 1 && m.num_experts < 2)
    p.add("system.expert_model_parallel_size=" + s(static_cast<long>(y.expert_model_parallel_size)) +
          " needs a mixture-of-experts model; set model.num_experts >= 2 or expert_model_parallel_size=1");
  if (y.pipeline_schedule == PipelineSchedule::interleaved && y.virtual_pipeline_model_parallel_size < 2)
    p.add("system.pipeline_schedule=interleaved needs system.virtual_pipeline_model_parallel_size >= 2");
  else if (y.pipeline_schedule == PipelineSchedule::zbv && y.virtual_pipeline_model_parallel_size != 2)
    p.add("system.pipeline_schedule=zbv places two model chunks on every stage (a V): set "
          "system.virtual_pipeline_model_parallel_size=2");
  else if (y.pipeline_schedule != PipelineSchedule::interleaved && y.pipeline_schedule != PipelineSchedule::zbv &&
           y.virtual_pipeline_model_parallel_size > 1)
    p.add("system.virtual_pipeline_model_parallel_size=" + s(static_cast<long>(y.virtual_pipeline_model_parallel_size)) +
          " needs system.pipeline_schedule=interleaved (or zbv with 2)");
  p.real("system.max_bubble_fraction", y.max_bubble_fraction, 0, 1, true, true, "between 0 and 1 (exclusive)");
  p.real("system.memory_budget_gb", y.memory_budget_gb, 0, 1e9, false, false, "a number of GB >= 0 (0 = the node's memory)");
  p.real("system.collective_timeout_s", y.collective_timeout_s, 0, 1e9, false, false, "a number of seconds >= 0 (0 = no limit)");
  p.real("system.step_timeout_s", y.step_timeout_s, 0, 1e9, false, false, "a number of seconds >= 0 (0 = no limit)");
  p.range("system.threads_per_rank", y.threads_per_rank, 0, 4096, "0 = automatic");
  p.range("system.zero_stage", y.zero_stage, 1, 3);
  if (y.layout == LayoutChoice::automatic && y.cluster_file.empty())
    p.add("system.layout=auto plans on a cluster description: set system.cluster_file (dtrain calibrate writes one for this "
          "machine; inputs/clusters holds data sheets)");
  if (y.offload_params && (y.zero_stage != 3 || !y.use_distributed_optimizer))
    p.add("system.offload_params=true keeps the parameter slices ZeRO-3 shards in host memory; set "
          "system.use_distributed_optimizer=true and system.zero_stage=3 (or offload_params=false)");
  if (y.zero_stage > 1 && !y.use_distributed_optimizer)
    p.add("system.zero_stage=" + s(static_cast<long>(y.zero_stage)) +
          " shards gradients over data-parallel ranks through the distributed optimizer; set system.use_distributed_optimizer=true");
  if (y.zero_stage > 1 && y.expert_model_parallel_size > 1)
    p.add("system.zero_stage=" + s(static_cast<long>(y.zero_stage)) + " with system.expert_model_parallel_size=" +
          s(static_cast<long>(y.expert_model_parallel_size)) + ": ZeRO-2/3 do not shard expert-parallel tensors yet; use zero_stage=1");
  const int head_dim = c.head_dim();
  if (y.device == ComputeDevice::cuda && y.context_parallel_size == 1 && head_dim > kernels::flash::kMaxHeadDim)
    p.add((c.model.kv_channels > 0 ? "model.kv_channels = " : "model.hidden_size / model.num_attention_heads = ") +
          s(static_cast<long>(head_dim)) + " dims per head: the CUDA backend's fused attention takes at most " +
          s(static_cast<long>(kernels::flash::kMaxHeadDim)) + " (its tiles' registers and shared memory); use more heads, a smaller head, "
          "or system.device=cpu");
  if (y.comm_backend == CommBackend::nccl && y.device != ComputeDevice::cuda)
    p.add("system.comm_backend=nccl needs system.device=cuda (NCCL moves GPU memory); use comm_backend=mpi or auto on CPUs");

  const auto& t = c.training;
  p.range("training.train_iters", t.train_iters, 0, kMaxSteps);
  p.range("training.eval_interval", t.eval_interval, 0, kMaxSteps, "0 = no validation");
  p.range("training.eval_iters", t.eval_iters, 1, 1000000);
  p.range("training.max_rollbacks", t.max_rollbacks, 0, 1000000);
  if (t.on_nonfinite == OnNonFinite::rollback && c.checkpoint.dir.empty())
    p.add("training.on_nonfinite=rollback goes back to the latest checkpoint of checkpoint.dir; set checkpoint.dir (and "
          "checkpoint.save_interval) or use on_nonfinite=stop");

  const auto& o = c.optimizer;
  p.real("optimizer.lr", o.lr, 0, 1e3, true, false, "a finite learning rate > 0");
  p.real("optimizer.min_lr", o.min_lr, 0, 1e3, false, false, "a finite learning rate >= 0");
  if (std::isfinite(o.lr) && std::isfinite(o.min_lr) && o.min_lr > o.lr)
    p.add("optimizer.min_lr=" + s(o.min_lr) + " is larger than optimizer.lr=" + s(o.lr) + "; the schedule decays from lr to min_lr");
  p.range("optimizer.warmup_iters", o.warmup_iters, 0, kMaxSteps);
  p.real("optimizer.weight_decay", o.weight_decay, 0, 1e3, false, false, "a finite number >= 0");
  p.real("optimizer.beta1", o.beta1, 0, 1, false, true, "in [0, 1)");
  p.real("optimizer.beta2", o.beta2, 0, 1, false, true, "in [0, 1)");
  p.real("optimizer.eps", o.eps, 0, 1, true, false, "a finite number > 0 (e.g. 1e-8)");
  p.real("optimizer.clip_grad", o.clip_grad, 0, 1e9, false, false, "a finite number >= 0 (0 = no clipping)");
  // Loss scales stay far inside fp32 and double: the scaled loss's gradients are fp32.
  p.real("optimizer.loss_scale", o.loss_scale, 0, 1e30, false, false, "a finite number >= 0 (0 = dynamic)");
  p.real("optimizer.initial_loss_scale", o.initial_loss_scale, 0, 1e30, true, false, "a finite number > 0 (e.g. 65536)");
  p.real("optimizer.min_loss_scale", o.min_loss_scale, 0, 1e30, true, false, "a finite number > 0 (e.g. 1)");
  if (std::isfinite(o.min_loss_scale) && std::isfinite(o.initial_loss_scale) && o.min_loss_scale > o.initial_loss_scale)
    p.add("optimizer.min_loss_scale=" + s(o.min_loss_scale) + " is larger than optimizer.initial_loss_scale=" + s(o.initial_loss_scale) +
          "; the scale starts at initial_loss_scale and falls no lower than min_loss_scale");
  p.range("optimizer.loss_scale_window", o.loss_scale_window, 1, kMaxSteps);
  p.range("optimizer.hysteresis", o.hysteresis, 1, kMaxSteps);

  try {
    parse_tokenizer_spec(c.data.tokenizer);
  } catch (const UserError& e) {
    p.add(std::string("data.tokenizer: ") + e.what());
  }
  p.range("checkpoint.save_interval", c.checkpoint.save_interval, 0, kMaxSteps, "0 = only at the end");
  p.range("checkpoint.keep_last", c.checkpoint.keep_last, 1, 1000000);
  p.range("checkpoint.keep_best", c.checkpoint.keep_best, 0, 1000000);
  p.range("training.early_stop_patience", t.early_stop_patience, 0, kMaxSteps, "0 = never");
  if (t.early_stop_patience > 0 && (c.checkpoint.dir.empty() || c.checkpoint.keep_best < 1 || t.eval_interval < 1))
    p.add("training.early_stop_patience=" + s(static_cast<long>(t.early_stop_patience)) +
          " ends with the best validation's weights, which need validations (training.eval_interval > 0) and their "
          "checkpoints kept (checkpoint.dir and checkpoint.keep_best >= 1)");
  if (c.checkpoint.keep_best > 0 && t.eval_interval < 1)
    p.add("checkpoint.keep_best=" + s(static_cast<long>(c.checkpoint.keep_best)) + " keeps the checkpoints of the lowest "
          "validation losses: set training.eval_interval > 0");
  p.real("debug.save_write_delay_s", c.debug.save_write_delay_s, 0, 3600, false, false, "a number of seconds between 0 and 3600");
  p.range("logging.log_interval", c.logging.log_interval, 1, kMaxSteps);
  p.range("logging.sample_tokens", c.logging.sample_tokens, 0, 1000000, "0 = no sample");
  p.real("logging.mfu_peak_tflops", c.logging.mfu_peak_tflops, 0, 1e6, false, false,
         "a finite number of TFLOP/s >= 0 (0 = measure it at start-up)");
  p.throw_if_any();
}

}  // namespace dtrain
