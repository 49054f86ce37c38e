// Every input.ini key, in one table. To add a key: add a field to config.hpp and one line here.
#include "config/options.hpp"

#include <charconv>
#include <cmath>
#include <sstream>
#include <string_view>

namespace po = boost::program_options;

namespace dtrain {
namespace {

template <typename T>
std::string text_of(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, double>) {
    // The shortest text that reads back as the same double (stored configurations round-trip), in fixed
    // notation where Python's repr would use it (1e-4 <= |v| < 1e16): 500000, 0.001, 1e-06.
    const double a = std::fabs(v);
    const auto format = a == 0 || (a >= 1e-4 && a < 1e16) ? std::chars_format::fixed : std::chars_format::scientific;
    char buf[64];
    os << std::string_view(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v, format).ptr - buf));
  } else {
    os << v;
  }
  return os.str();
}

}  // namespace

template <typename T>
void OptionTable::add(const char* name, T* target, const char* help) {
  const std::string def = text_of(*target);
  desc_.add_options()(name, po::value<T>(target)->default_value(*target, def), help);
  infos_.push_back({name, help, def, [target] { return text_of(*target); }});
}

OptionTable::OptionTable(Config& c) : desc_("input.ini keys") {
  auto& m = c.model;
  add("model.num_layers", &m.num_layers, "transformer blocks");
  add("model.hidden_size", &m.hidden_size, "model width d");
  add("model.num_attention_heads", &m.num_attention_heads, "attention heads (must divide hidden_size)");
  add("model.ffn_hidden_size", &m.ffn_hidden_size, "MLP width; 0 = 4 * hidden_size");
  add("model.seq_length", &m.seq_length, "tokens per sample T");
  add("model.vocab_size", &m.vocab_size, "vocabulary size, at least the tokenizer's (256 byte, 50257 gpt2; e.g. 50304)");
  add("model.global_batch_size", &m.global_batch_size, "samples per optimizer step, over all data-parallel ranks");
  add("model.micro_batch_size", &m.micro_batch_size,
      "samples per forward/backward pass; 'auto' picks the largest that meets "
      "system.max_bubble_fraction and system.memory_budget_gb");
  add("model.num_experts", &m.num_experts,
      "mixture-of-experts experts E; 0 = dense MLP; E >= 1 replaces the MLP of every moe_layer_freq-th block by E experts");
  add("model.moe_router_topk", &m.moe_router_topk,
      "experts per token k (1 <= k <= num_experts): the router's softmax over the experts in fp32, then its k largest "
      "probabilities (ties: the lower expert index) weight the experts' outputs, not renormalised");
  add("model.moe_ffn_hidden_size", &m.moe_ffn_hidden_size, "width of each expert's MLP; 0 = ffn_hidden_size");
  add("model.moe_aux_loss_coeff", &m.moe_aux_loss_coeff,
      "weight of the Switch/GShard load-balancing loss coeff * E / (N^2 k) * sum_e (sum_t p_te) * tokens_e, per MoE "
      "layer and micro-batch of N tokens, added to the objective (averaged over micro-batches like the LM loss)");
  add("model.moe_router_load_balancing_type", &m.moe_router_load_balancing_type,
      "aux_loss (the load-balancing loss above) or none (no auxiliary term)");
  add("model.moe_capacity_factor", &m.moe_capacity_factor,
      "none = dropless; a number f > 0 = each expert takes at most ceil(f * N * k / E) of a micro-batch's N*k "
      "assignments, the most probable (ties: the earlier token); the others contribute nothing");
  add("model.moe_layer_freq", &m.moe_layer_freq, "block l is a MoE block when l % moe_layer_freq == 0 (1 = every block)");
  add("model.moe_layer_pattern", &m.moe_layer_pattern,
      "instead of moe_layer_freq (Megatron's list form): one 0 or 1 per block, 1 = a MoE block, as [1,0,1,1] or 1011; "
      "empty = moe_layer_freq decides");
  add("model.moe_router_pre_softmax", &m.moe_router_pre_softmax,
      "true: a token's routing weights are its top-k probabilities of the softmax over all experts (dtrain's default); false: "
      "those renormalised to sum to 1, the softmax of the top-k logits (Megatron's default; Mixtral, Qwen3-MoE)");
  add("model.normalization", &m.normalization, "LayerNorm (GPT-2) or RMSNorm (Llama): every block's norms and the final norm");
  add("model.norm_epsilon", &m.norm_epsilon, "epsilon added to the variance (LayerNorm) or mean square (RMSNorm)");
  add("model.position_embedding_type", &m.position_embedding_type,
      "learned_absolute (a learned position table, GPT-2) or rope (rotary embedding of queries and keys, Llama)");
  add("model.rotary_base", &m.rotary_base, "RoPE base theta (Llama 2: 10000, Llama 3: 500000)");
  add("model.rotary_percent", &m.rotary_percent, "share of each head's dimensions that RoPE rotates (0 < p <= 1)");
  add("model.add_qkv_bias", &m.add_qkv_bias,
      "biases on the query, key and value projections only, without add_bias_linear's other biases (Qwen2)");
  add("model.kv_channels", &m.kv_channels,
      "dims per attention head, when not hidden_size / num_attention_heads (Qwen3: 128 at hidden 1024 with 16 heads); 0 = that quotient");
  add("model.qk_layernorm", &m.qk_layernorm,
      "RMSNorm over each head's queries and keys (a weight of head_dim for each), before RoPE (Qwen3, OLMo 2)");
  add("model.window_attn_skip_freq", &m.window_attn_skip_freq,
      "with window_size: blocks N, 2N, ... (counting from 1) attend to every earlier key, the others to the window "
      "(Megatron's key; Gemma 3's five local blocks to one global: 6); 0 = every block windowed");
  add("model.window_size", &m.window_size,
      "sliding-window attention: the keys each token sees, itself included (Mistral: 4096); 0 = every earlier token");
  add("model.rope_scaling", &m.rope_scaling,
      "none, or llama3: Llama 3.1's remapping of RoPE's frequencies (Hugging Face's rope_scaling rope_type llama3)");
  add("model.rope_scaling_factor", &m.rope_scaling_factor, "llama3 scaling: low frequencies turn this many times slower (8)");
  add("model.rope_scaling_low_freq_factor", &m.rope_scaling_low_freq_factor,
      "llama3 scaling: wavelengths beyond original context / this factor are scaled (1)");
  add("model.rope_scaling_high_freq_factor", &m.rope_scaling_high_freq_factor,
      "llama3 scaling: wavelengths below original context / this factor are kept (4)");
  add("model.rope_scaling_original_max_position_embeddings", &m.rope_scaling_original_max_position_embeddings,
      "llama3 scaling: the context length the model was first trained with (8192)");
  add("model.swiglu", &m.swiglu, "gated MLP silu(x W_gate) * (x W_up) of width ffn_hidden_size (Llama) instead of GELU");
  add("model.group_query_attention", &m.group_query_attention, "grouped-query attention: num_query_groups key/value heads");
  add("model.num_query_groups", &m.num_query_groups,
      "key/value heads with group_query_attention (divides num_attention_heads; 1 = multi-query attention)");
  add("model.untie_embeddings_and_output_weights", &m.untie_embeddings_and_output_weights,
      "a separate output layer (lm_head) instead of the input embedding's transpose");
  add("model.add_bias_linear", &m.add_bias_linear, "biases in the attention and MLP linear layers (false for Llama)");
  add("model.recompute_granularity", &m.recompute_granularity,
      "activation recomputation: none; selective (the MLP activation is recomputed in backward, the GEMM outputs "
      "kept; attention is fused and keeps only its log-sum-exp anyway); full (the blocks recompute_method picks keep only their input and rerun their "
      "forward in backward). Gradients are bit-identical to none");
  add("model.recompute_method", &m.recompute_method,
      "with full: uniform (every block, in groups of recompute_num_layers keeping only the group's input) or block (the "
      "first recompute_num_layers blocks of each model chunk)");
  add("model.recompute_num_layers", &m.recompute_num_layers, "with full: the group size (uniform) or the number of blocks (block)");

  auto& s = c.system;
  add("system.layout", &s.layout,
      "manual (the layout keys as given) or auto: at start-up the planner chooses tp, cp, pp, dp, ep, v, the micro-batch, "
      "recomputation and the ZeRO stage for the job's ranks on system.cluster_file, and prints the choice and its "
      "prediction; layout keys given on the command line still hold");
  add("system.cluster_file", &s.cluster_file,
      "with layout=auto: the cluster description to plan on (dtrain calibrate writes one for this machine; "
      "inputs/clusters holds data sheets)");
  add("system.device", &s.device, "cpu or cuda (one GPU per rank: local rank modulo the visible GPUs)");
  add("system.comm_backend", &s.comm_backend,
      "auto, nccl or mpi: auto = NCCL with device=cuda when every rank has a GPU of its own, else MPI (GPU buffers "
      "staged through pinned host memory; how several ranks share one GPU)");
  add("system.precision", &s.precision,
      "fp32, bf16, fp16 or fp8: 16-bit weights, activations and messages for compute (fp32 arithmetic), fp32 master weights, "
      "gradients and optimizer state; fp16 (for GPUs without bf16) scales the loss (optimizer.loss_scale and the keys "
      "after it); fp8 is bf16 whose blocks' linear layers run fp8 GEMMs (e4m3 inputs and weights, e5m2 output gradients, "
      "a power-of-two scale per tensor from its current amax; cuBLASLt on GPUs of compute capability 8.9+); "
      "checkpoints hold the fp32 master weights in every precision");
  add("system.tensor_model_parallel_size", &s.tensor_model_parallel_size, "tensor-parallel ranks tp");
  add("system.pipeline_model_parallel_size", &s.pipeline_model_parallel_size, "pipeline stages pp");
  add("system.pipeline_first_stage_layers", &s.pipeline_first_stage_layers,
      "blocks of the first pipeline stage (Megatron's decoder_first_pipeline_num_layers); the other stages share the rest "
      "evenly; 0 = an even split");
  add("system.pipeline_last_stage_layers", &s.pipeline_last_stage_layers,
      "blocks of the last pipeline stage (Megatron's decoder_last_pipeline_num_layers); 0 = as the other stages");
  add("system.pipeline_account_for_embedding", &s.pipeline_account_for_embedding,
      "count the embedding as a block when splitting the blocks over the stages (the first stage holds one fewer)");
  add("system.pipeline_account_for_loss", &s.pipeline_account_for_loss,
      "count the LM head and loss as a block when splitting the blocks over the stages (the last stage holds one fewer)");
  add("system.virtual_pipeline_model_parallel_size", &s.virtual_pipeline_model_parallel_size,
      "model chunks per pipeline rank v (interleaved schedule)");
  add("system.context_parallel_size", &s.context_parallel_size,
      "context-parallel ranks cp: each sequence in 2cp chunks, rank r holding chunks r and 2cp-1-r, ring attention over "
      "the cp group; seq_length must divide by 2cp");
  add("system.expert_model_parallel_size", &s.expert_model_parallel_size,
      "expert-parallel ranks ep (MoE models): experts split over ep consecutive data-parallel ranks, tokens sent to "
      "them with all-to-all; ep divides model.num_experts and the data-parallel size");
  add("system.sequence_parallel", &s.sequence_parallel, "shard LayerNorm/residual regions along the sequence (needs tp > 1)");
  add("system.use_distributed_optimizer", &s.use_distributed_optimizer, "shard optimizer state over data-parallel ranks (ZeRO-1)");
  add("system.zero_stage", &s.zero_stage,
      "with use_distributed_optimizer: what is sharded over data-parallel ranks; 1 = optimizer state (ZeRO-1), 2 = "
      "also the reduced gradients (ZeRO-2), 3 = also the parameters, gathered block by block (ZeRO-3)");
  add("system.offload_optimizer", &s.offload_optimizer,
      "keep AdamW's moments and fp32 master weights (of the rank's owned slices) in host memory and update them there "
      "with the host's AdamW: each step the owned gradients are copied to the host and the updated weights back; on a "
      "GPU this frees 12 (bf16, fp16) or 8 (fp32) bytes of device memory per owned parameter");
  add("system.offload_params", &s.offload_params,
      "with zero_stage=3: keep the rank's parameter slices in host memory between uses; each gather copies the slice to "
      "the device first, and the optimizer's updated slice goes back to the host; on a GPU this frees 2 (bf16, fp16) or 4 "
      "(fp32) bytes of device memory per owned parameter, and with offload_optimizer too only the gathered blocks stay");
  add("system.overlap_grad_reduce", &s.overlap_grad_reduce, "start each gradient bucket's reduction as soon as it is ready");
  add("system.overlap_param_gather", &s.overlap_param_gather, "overlap the distributed optimizer's parameter all-gather with the next forward");
  add("system.pipeline_schedule", &s.pipeline_schedule, "1f1b, interleaved, afab (all-forward-all-backward), zb-h1 or zbv (zero-bubble: H1, or V-shaped with two chunks per stage)");
  add("system.max_bubble_fraction", &s.max_bubble_fraction, "largest predicted pipeline bubble that micro_batch_size=auto accepts");
  add("system.memory_budget_gb", &s.memory_budget_gb,
      "memory a rank may use, in GB; the plan (and micro_batch_size=auto) must fit it; 0 = the node's memory "
      "(or the job's cgroup limit) divided by the ranks on the node");
  add("system.rank_order", &s.rank_order, "rank order of the parallel axes, fastest first (tp, cp, dp, pp)");
  add("system.collective_timeout_s", &s.collective_timeout_s, "a collective or transfer taking longer aborts the job, naming the rank");
  add("system.step_timeout_s", &s.step_timeout_s, "a training step taking longer aborts the job, naming the rank");
  add("system.threads_per_rank", &s.threads_per_rank, "BLAS threads per rank; 0 = SLURM_CPUS_PER_TASK, else cores / ranks on the node");

  auto& t = c.training;
  add("training.train_iters", &t.train_iters, "optimizer steps to run");
  add("training.seed", &t.seed, "seed of initialisation and data sampling");
  add("training.eval_interval", &t.eval_interval, "steps between validation passes; 0 = never");
  add("training.iterations_to_skip", &t.iterations_to_skip,
      "1-based steps whose batch is consumed without an update (Megatron's key; e.g. a batch known to make the loss spike)");
  add("training.on_nonfinite", &t.on_nonfinite,
      "stop (exit 5), or rollback: a non-finite loss or gradient norm reloads checkpoint.dir's latest checkpoint on "
      "every rank and trains on, skipping that step's batch (logged, and kept in later checkpoints)");
  add("training.max_rollbacks", &t.max_rollbacks, "with on_nonfinite=rollback: rollbacks a run may make; the next non-finite step stops it");
  add("training.freeze", &t.freeze,
      "comma-separated glob patterns of tensor names that do not train (e.g. 'wte,wpe' or 'h0.*,h1.*'; the names are "
      "those of checkpoints and `dtrain --dry-run`): no gradient, optimizer state or master copy, values as initialised or "
      "loaded; empty = every tensor trains");
  add("training.early_stop_patience", &t.early_stop_patience,
      "end training after this many validations without a new lowest validation loss, with the best checkpoint's weights as "
      "the final weights (needs checkpoint.keep_best >= 1; 0 = never)");
  add("training.eval_iters", &t.eval_iters, "global batches per validation pass");

  auto& o = c.optimizer;
  add("optimizer.lr", &o.lr, "peak learning rate");
  add("optimizer.min_lr", &o.min_lr, "learning rate at the end of the cosine decay");
  add("optimizer.warmup_iters", &o.warmup_iters, "steps of linear warmup");
  add("optimizer.weight_decay", &o.weight_decay, "AdamW decoupled weight decay (not applied to biases and LayerNorm)");
  add("optimizer.beta1", &o.beta1, "AdamW beta1");
  add("optimizer.beta2", &o.beta2, "AdamW beta2");
  add("optimizer.eps", &o.eps, "AdamW epsilon");
  add("optimizer.clip_grad", &o.clip_grad, "global gradient-norm clip; 0 = off");
  add("optimizer.loss_scale", &o.loss_scale,
      "precision=fp16: a fixed loss scale, or 0 = dynamic loss scaling (the keys below); a step whose gradients overflow "
      "is skipped either way");
  add("optimizer.initial_loss_scale", &o.initial_loss_scale, "precision=fp16, dynamic: the first loss scale");
  add("optimizer.min_loss_scale", &o.min_loss_scale, "precision=fp16, dynamic: the scale never falls below it");
  add("optimizer.loss_scale_window", &o.loss_scale_window,
      "precision=fp16, dynamic: steps without an overflow after which the scale doubles");
  add("optimizer.hysteresis", &o.hysteresis, "precision=fp16, dynamic: overflows (since the last growth) before the scale halves");

  add("data.path", &c.data.path,
      "data prefix, or a blend of prefixes in Megatron's syntax \"0.7 PREFIX_A 0.3 PREFIX_B\" (weights normalised; "
      "each sample comes from one prefix, drawn by weight). format=dtrain: PREFIX.train.bin and PREFIX.val.bin "
      "(dtrain-data); format=megatron: PREFIX.bin + PREFIX.idx");
  add("data.format", &c.data.format,
      "dtrain (token files made by dtrain-data) or megatron (Megatron-LM indexed datasets, read in place through "
      "mmap; uint8, uint16 or int32 tokens, checked against model.vocab_size at start-up, each rank scanning its "
      "share; dtrain-data --format megatron makes them)");
  add("data.split", &c.data.split,
      "format=megatron: train,valid,test weights; each dataset's documents are cut in this ratio, in order: the "
      "first part trains, the second validates, the third is left unused (format=dtrain uses the .val.bin files)");
  add("data.tokenizer", &c.data.tokenizer,
      "tokenizer of the token files: byte (vocabulary 256), gpt2 (GPT-2's BPE from data/tokenizers/gpt2, fetched by "
      "tools/fetch-data; gpt2:DIR for another directory; vocabulary 50257) or sentencepiece:MODEL_FILE; it must be the one "
      "the token files were made with (dtrain-data --tokenizer), and decodes for dtrain generate");
  add("data.reset_position_ids", &c.data.reset_position_ids,
      "documents packed in a sample (ended by the tokenizer's end-of-document token: dtrain-data --append-eod or --sft): "
      "positions restart at 0 after each one (Megatron's --reset-position-ids)");
  add("data.reset_attention_mask", &c.data.reset_attention_mask,
      "a token attends only to earlier tokens of its own document (block-diagonal causal attention, Megatron's "
      "--reset-attention-mask); key blocks wholly before a query block's document are skipped");
  add("data.eod_mask_loss", &c.data.eod_mask_loss,
      "no loss where the input token is the end-of-document token (predicting the next document's start; Megatron's "
      "--eod-mask-loss)");
  add("data.pack", &c.data.pack,
      "samples are bins of whole documents (best fit, longest first, the rest padded with masked end-of-document tokens) "
      "instead of windows cut across documents: for fine-tuning data, so that no conversation is split");

  auto& k = c.checkpoint;
  add("checkpoint.dir", &k.dir, "checkpoint directory; empty = no checkpoints");
  add("checkpoint.save_interval", &k.save_interval, "steps between checkpoints; 0 = only at the end");
  add("checkpoint.keep_last", &k.keep_last, "checkpoints to keep");
  add("checkpoint.keep_best", &k.keep_best,
      "also keep the checkpoints with the lowest validation losses, this many (0 = off); every validation step then saves");
  add("checkpoint.load", &k.load, "auto (resume from latest if present), none, or a checkpoint path");
  add("checkpoint.init_from", &k.init_from,
      "weights file (.h5: model-final.h5, ckpt-consolidate --out or --import-hf), or hf:DIR, a Hugging Face model directory "
      "(GPT2LMHeadModel or LlamaForCausalLM: config.json + safetensors; rank 0 converts it once into checkpoint.dir), to "
      "start training from, on any layout, with a fresh optimizer and step 0, when there is no checkpoint to resume; its "
      "model keys must be the run's");
  add("checkpoint.async_save", &k.async_save,
      "true: at a save's step boundary each rank copies what it writes into a host buffer (as large as its share of "
      "the checkpoint, allocated at start) and writes its shard on a background thread while training goes on; the "
      "checkpoint is published (latest) at a later step boundary once every rank's write has finished, and at a stop "
      "or the end of training after waiting for it. false: training waits for every save");

  add("logging.log_interval", &c.logging.log_interval, "steps between step lines");
  add("logging.metrics_file", &c.logging.metrics_file, "JSON-lines metrics file; empty = none");
  add("logging.tensorboard_dir", &c.logging.tensorboard_dir,
      "directory for a TensorBoard event file of the metrics file's values (rank 0; tensorboard --logdir DIR); empty = none");
  add("logging.trace_file", &c.logging.trace_file, "Chrome trace file prefix; empty = none");
  add("logging.sample_tokens", &c.logging.sample_tokens, "tokens of the text sample printed after training; 0 = no sample");
  add("logging.mfu_peak_tflops", &c.logging.mfu_peak_tflops,
      "the peak MFU divides by, in TFLOP/s per node (CPU runs) or per GPU: a data sheet's figure (an H100 SXM's dense bf16: "
      "989); 0 = measured at start-up (sgemm on all of a node's cores, about 0.15 s; the best cuBLAS GEMM, about 0.5 s a GPU)");

  add("debug.stall_rank", &c.debug.stall_rank, "fault injection for tests: this world rank hangs (-1 = none)");
  add("debug.stall_at_step", &c.debug.stall_at_step, "fault injection for tests: ... in the first forward of this step");
  add("debug.stall_once_file", &c.debug.stall_once_file,
      "fault injection for tests: stall only while this file does not exist (the stalling rank creates it), so a restart runs on");
  add("debug.synchronous_sends", &c.debug.synchronous_sends,
      "for tests: pipeline sends use MPI_Issend, so a schedule that relies on MPI buffering deadlocks");
  add("debug.nonfinite_grad_at_step", &c.debug.nonfinite_grad_at_step,
      "fault injection for tests: world rank 0 writes inf into a gradient after this step's gradient sync (1-based)");
  add("debug.save_write_delay_s", &c.debug.save_write_delay_s,
      "fault injection for tests: every checkpoint write pauses this many seconds with its shard half written");
}

bool OptionTable::has(const std::string& name) const {
  for (const auto& o : infos_)
    if (o.name == name) return true;
  return false;
}

std::string options_help(const OptionTable& table) {
  std::ostringstream os;
  std::string section;
  for (const auto& o : table.options()) {
    const std::string sec = o.name.substr(0, o.name.find('.'));
    if (sec != section) {
      os << "\n[" << sec << "]\n";
      section = sec;
    }
    std::string key = "  " + o.name + " (default: " + (o.default_text.empty() ? "\"\"" : o.default_text) + ")";
    os << key << "\n      " << o.help << "\n";
  }
  return os.str();
}

std::string config_as_ini(const OptionTable& table) {
  std::ostringstream os;
  std::string section;
  for (const auto& o : table.options()) {
    const auto dot = o.name.find('.');
    const std::string sec = o.name.substr(0, dot);
    if (sec != section) {
      os << (section.empty() ? "" : "\n") << "[" << sec << "]\n";
      section = sec;
    }
    os << o.name.substr(dot + 1) << " = " << o.value_text() << "\n";
  }
  return os.str();
}

}  // namespace dtrain
