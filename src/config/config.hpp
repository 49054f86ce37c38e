// The resolved configuration of a run: every key of input.ini as a typed field.
// Filled from the one options table (options.cpp); checked by validate (validate.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "config/choices.hpp"

namespace dtrain {

struct ModelConfig {
  int num_layers = 4;
  int hidden_size = 128;
  int num_attention_heads = 4;
  int ffn_hidden_size = 0;         // 0 = 4 * hidden_size
  int seq_length = 128;
  int vocab_size = 256;
  int global_batch_size = 8;
  MicroBatchSize micro_batch_size;  // resolved by the training plan
  // Mixture of experts (Megatron's keys): num_experts = 0 is the dense MLP; n >= 1 replaces the MLP of
  // every moe_layer_freq-th block (block l with l % moe_layer_freq == 0) by n experts of width
  // moe_ffn_hidden_size, each token routed to moe_router_topk of them.
  int num_experts = 0;
  int moe_router_topk = 2;
  int moe_ffn_hidden_size = 0;      // 0 = ffn_hidden_size (resolved)
  double moe_aux_loss_coeff = 0.0;  // weight of the load-balancing loss (0 = off)
  MoeLoadBalancing moe_router_load_balancing_type = MoeLoadBalancing::aux_loss;
  CapacityFactor moe_capacity_factor;  // unset = dropless
  int moe_layer_freq = 1;
  // Megatron's list form of moe_layer_freq: one 0 or 1 per block, 1 = a MoE block ("[1,0,1,1]" or "1011");
  // empty = moe_layer_freq decides (Qwen3-MoE's mlp_only_layers and decoder_sparse_step come in as one).
  std::string moe_layer_pattern;
  // Routing weights: the top-k of the softmax over all experts (true, dtrain's default), or those renormalised to sum
  // to 1, the softmax of the top-k logits (false: Megatron's default; Mixtral, Qwen3-MoE's norm_topk_prob).
  bool moe_router_pre_softmax = true;
  // The block design (Megatron's keys): GPT-2 by default; Llama is RMSNorm + rope + swiglu + GQA,
  // untied, no linear biases.
  Normalization normalization = Normalization::layernorm;
  double norm_epsilon = 1e-5;
  PositionEmbedding position_embedding_type = PositionEmbedding::learned_absolute;
  double rotary_base = 10000.0;
  double rotary_percent = 1.0;      // share of each head's dims that RoPE rotates
  // Llama 3.1's remapping of RoPE's frequencies (kernels/rope_frequencies.hpp), with its published values.
  RopeScaling rope_scaling = RopeScaling::none;
  double rope_scaling_factor = 8.0;
  double rope_scaling_low_freq_factor = 1.0;
  double rope_scaling_high_freq_factor = 4.0;
  double rope_scaling_original_max_position_embeddings = 8192.0;
  bool swiglu = false;              // gated MLP: ffn_hidden_size gate and as many up units
  bool group_query_attention = false;
  int num_query_groups = 1;         // key/value heads with group_query_attention
  bool untie_embeddings_and_output_weights = false;
  bool add_bias_linear = true;      // biases of the attention and MLP linear layers
  bool add_qkv_bias = false;        // biases on the query, key and value projections (also without add_bias_linear)
  int window_size = 0;              // sliding-window attention: keys a token sees, itself included (0 = all earlier ones)
  // Megatron's: with a window, blocks N, 2N, ... (counting from 1) attend to every earlier key (Gemma 3: 6,
  // five local blocks to one global); 0 = every block windowed.
  int window_attn_skip_freq = 0;
  int kv_channels = 0;              // dims per attention head (0 = hidden_size / num_attention_heads)
  bool qk_layernorm = false;        // RMSNorm of each head's queries and keys before RoPE (Qwen3, OLMo 2)
  // Activation recomputation (memory for compute; gradients unchanged bit for bit).
  RecomputeGranularity recompute_granularity = RecomputeGranularity::none;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  int recompute_num_layers = 1;
  int kv_heads() const { return group_query_attention ? num_query_groups : num_attention_heads; }
  bool moe_layer(int layer) const {
    if (num_experts <= 0) return false;
    if (moe_layer_pattern.empty()) return moe_layer_freq > 0 && layer % moe_layer_freq == 0;
    const std::string flags = moe_pattern_flags(moe_layer_pattern);
    return layer >= 0 && layer < static_cast<int>(flags.size()) && flags[static_cast<std::size_t>(layer)] == '1';
  }
  // The 0 and 1 digits of a moe_layer_pattern, in order.
  static std::string moe_pattern_flags(const std::string& pattern) {
    std::string flags;
    for (char ch : pattern)
      if (ch == '0' || ch == '1') flags += ch;
    return flags;
  }
};

struct SystemConfig {
  LayoutChoice layout = LayoutChoice::manual;  // auto: the planner chooses the layout keys at start-up
  std::string cluster_file;                     // with layout = auto: the cluster description it plans on
  ComputeDevice device = ComputeDevice::cpu;
  CommBackend comm_backend = CommBackend::automatic;
  Precision precision = Precision::fp32;
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int virtual_pipeline_model_parallel_size = 1;
  // Uneven pipeline stages (plan/pipeline_split.hpp, Megatron's keys): blocks of the first / last stage
  // (0 = even), or the embedding / the loss counted as a block.
  int pipeline_first_stage_layers = 0;
  int pipeline_last_stage_layers = 0;
  bool pipeline_account_for_embedding = false;
  bool pipeline_account_for_loss = false;
  int context_parallel_size = 1;
  int expert_model_parallel_size = 1;
  bool sequence_parallel = false;
  bool use_distributed_optimizer = false;
  int zero_stage = 1;              // with the distributed optimizer: 1 optimizer state, 2 + gradients, 3 + parameters
  bool offload_optimizer = false;  // AdamW's moments and master weights in host memory, updated there
  bool offload_params = false;     // ZeRO-3: the owned parameter slices in host memory, gathered from there
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  PipelineSchedule pipeline_schedule = PipelineSchedule::one_f_one_b;
  double max_bubble_fraction = 0.25;
  double memory_budget_gb = 0.0;   // 0 = the node's memory over its ranks
  std::string rank_order = "tp-cp-dp-pp";
  double collective_timeout_s = 300.0;
  double step_timeout_s = 600.0;
  int threads_per_rank = 0;        // 0 = SLURM_CPUS_PER_TASK, else cores / local ranks
};

struct TrainingConfig {
  int train_iters = 100;
  std::uint64_t seed = 1234;
  int eval_interval = 50;
  int eval_iters = 4;
  StepList iterations_to_skip;              // their batches consumed without an update
  OnNonFinite on_nonfinite = OnNonFinite::stop;
  int max_rollbacks = 3;                    // with rollback: the run stops at the next one
  int early_stop_patience = 0;              // end after this many validations without a new best (0 = never)
  // Tensors that do not train: comma-separated glob patterns of tensor names ("wte", "h*.ln1_w"). They
  // keep their initial or loaded values and have no gradient, optimizer state or master copy.
  std::string freeze;
};

struct OptimizerConfig {
  double lr = 1e-3;
  double min_lr = 1e-4;
  int warmup_iters = 10;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double clip_grad = 1.0;
  // fp16 loss scaling (Megatron's keys and defaults): the loss is multiplied by the scale before the
  // backward pass and the gradients divided by it; a step whose gradients overflow is skipped. A fixed
  // loss_scale > 0, or dynamic (0): start at initial_loss_scale, halve after `hysteresis` overflows
  // (not below min_loss_scale), double after loss_scale_window steps without one.
  double loss_scale = 0.0;
  double initial_loss_scale = 4294967296.0;  // 2^32
  double min_loss_scale = 1.0;
  int loss_scale_window = 1000;
  int hysteresis = 2;
};

struct DataConfig {
  std::string path = "data/mobydick";  // a prefix, or a blend "W1 PREFIX1 W2 PREFIX2 ..."
  DataFormat format = DataFormat::dtrain;
  DataSplit split;  // format=megatron: documents to train, valid, test
  std::string tokenizer = "byte";
  // Documents packed in a sample, found by the tokenizer's end-of-document token (Megatron's keys):
  bool reset_position_ids = false;    // positions restart at each document
  bool reset_attention_mask = false;  // attention stays inside each document
  bool eod_mask_loss = false;         // no loss where the input is the end-of-document token
  bool pack = false;                  // samples are whole documents, best fit, padded (not windows cut across them)
};

struct CheckpointConfig {
  std::string dir;
  int save_interval = 0;
  int keep_last = 2;
  int keep_best = 0;  // also keep the checkpoints of the lowest validation losses (0 = off); validations then save
  CheckpointLoad load;
  std::string init_from;  // a weights file (.h5) to start from when there is no checkpoint to resume
  bool async_save = false;  // snapshot at the step boundary, write the shards on a background thread
};

struct LoggingConfig {
  int log_interval = 1;
  std::string metrics_file;
  std::string tensorboard_dir;  // empty = none
  std::string trace_file;
  int sample_tokens = 240;  // the text sample after training; 0 = none
  double mfu_peak_tflops = 0.0;  // the peak MFU divides by, per node (CPU) or per GPU; 0 = measured at start-up
};

// Fault injection for tests of the failure paths; never set in production inputs.
struct DebugConfig {
  int stall_rank = -1;     // this world rank stops making progress ...
  int stall_at_step = -1;  // ... in the first forward of this step (1-based)
  std::string stall_once_file;  // when set: only while this file does not exist; the stalling rank creates it
  bool synchronous_sends = false;  // pipeline sends complete only when matched (MPI_Issend): no buffering
  double save_write_delay_s = 0.0;  // a checkpoint write pauses this long with its shard half written
  int nonfinite_grad_at_step = -1;  // world rank 0 writes inf into a gradient it counts, after the gradient sync of this step (1-based)
};

struct Config {
  ModelConfig model;
  SystemConfig system;
  TrainingConfig training;
  OptimizerConfig optimizer;
  DataConfig data;
  CheckpointConfig checkpoint;
  LoggingConfig logging;
  DebugConfig debug;

  int ffn_hidden() const { return model.ffn_hidden_size > 0 ? model.ffn_hidden_size : 4 * model.hidden_size; }
  int moe_ffn_hidden() const { return model.moe_ffn_hidden_size > 0 ? model.moe_ffn_hidden_size : ffn_hidden(); }
  // Dims per attention head: model.kv_channels, else hidden_size / num_attention_heads (Megatron's).
  int head_dim() const {
    if (model.kv_channels > 0) return model.kv_channels;
    return model.num_attention_heads > 0 ? model.hidden_size / model.num_attention_heads : 0;
  }
  // Dims of each head that RoPE turns: int(head_dim * rotary_percent), as Megatron.
  int rotary_dims() const { return static_cast<int>(head_dim() * model.rotary_percent + 1e-9); }
};

}  // namespace dtrain
