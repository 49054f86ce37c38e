// The input keys whose values are words, not numbers: each is an enum (or a small struct) parsed once,
// when the options table reads the INI file and the command line, and printed back as the same word.
// An unknown word is an error naming the key and the accepted words.
#pragma once
#include <boost/any.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace dtrain {

// system.device: where a rank computes.
enum class ComputeDevice { cpu, cuda };

// system.comm_backend: what moves the data between ranks. auto = NCCL when every rank computes on a
// GPU of its own, else MPI (with device buffers staged through pinned host memory).
enum class CommBackend { automatic, nccl, mpi };

// system.precision: the storage of the model's compute tensors (weights, activations, messages).
// Master weights, gradients and optimizer state are fp32 in all of them; fp16 runs scale the loss
// (OptimizerConfig: loss scaling) so that small activation gradients stay representable. fp8 is a bf16
// run whose blocks' linear layers run fp8 GEMMs (e4m3 inputs and weights, e5m2 output gradients, each
// tensor at its own power-of-two scale: model/linear_gemms.hpp).
enum class Precision { fp32, bf16, fp16, fp8 };
// bf16, fp16 and fp8: 16-bit compute storage, with fp32 master weights in the optimizer.
inline bool is_16bit(Precision p) { return p != Precision::fp32; }
// The storage type's precision: fp8 runs store bf16.
inline Precision storage_precision(Precision p) { return p == Precision::fp8 ? Precision::bf16 : p; }

// model.normalization: the norm of every block and the final norm (Megatron's words).
enum class Normalization { layernorm /* "LayerNorm" */, rmsnorm /* "RMSNorm" */ };

// model.position_embedding_type: learned absolute positions (GPT-2, a wpe table) or rotary (Llama).
enum class PositionEmbedding { learned_absolute, rope };
// model.rope_scaling: RoPE's frequencies as trained, or remapped for a longer context as Llama 3.1 does
// (Hugging Face's rope_type "llama3").
enum class RopeScaling { none, llama3 };

// model.recompute_granularity (Megatron's words): which activations the backward pass recomputes
// instead of keeping. none; selective = the MLP activation (GELU/SwiGLU output) of every block (fused
// attention keeps no probabilities to recompute); full = everything of the blocks model.recompute_method
// picks but their input.
enum class RecomputeGranularity { none, selective, full };

// model.recompute_method, with full: uniform = every block, in groups of model.recompute_num_layers that
// keep only the group's input; block = only the first model.recompute_num_layers blocks of each
// model chunk, each keeping its input.
enum class RecomputeMethod { uniform, block };

enum class PipelineSchedule {
  one_f_one_b,  // "1f1b": Megatron's non-interleaved 1F1B
  interleaved,  // "interleaved": interleaved 1F1B over virtual_pipeline_model_parallel_size chunks
  afab,         // "afab": all forwards, then all backwards (the oracle)
  zb_h1,        // "zb-h1": zero-bubble H1, the backward split into input and weight gradients
  zbv,          // "zbv": zero-bubble V, two chunks per stage placed in a V, split backward
};

// model.moe_router_load_balancing_type (Megatron's words): aux_loss = the Switch/GShard load-balancing
// loss (model.moe_aux_loss_coeff) is added to the objective; none = no auxiliary term.
enum class MoeLoadBalancing { aux_loss, none };

// model.moe_capacity_factor: unset ("none", the default) = dropless routing; a number f > 0 = each
// expert takes at most ceil(f * tokens * topk / experts) assignments of a micro-batch, the rest dropped.
struct CapacityFactor {
  bool set = false;
  double value = 0.0;
};

// data.format: dtrain token files (PREFIX.train.bin, PREFIX.val.bin) or Megatron indexed datasets
// (PREFIX.bin + PREFIX.idx).
enum class DataFormat { dtrain, megatron };

// data.split: Megatron's train,valid,test weights ("969,30,1"): a Megatron dataset's documents are cut
// in this ratio (weights need not sum to anything; missing ones are 0; train > 0).
struct DataSplit {
  double weights[3] = {969, 30, 1};
};

// training.iterations_to_skip (Megatron's key): 1-based steps whose batch is consumed without an update.
struct StepList {
  std::vector<long> steps;  // ascending, each once
  bool contains(long step) const;
};

// system.layout: the layout keys as given (manual), or chosen at start-up by the planner (auto).
enum class LayoutChoice { manual, automatic };

// training.on_nonfinite: what a non-finite loss or gradient norm does (fp16's overflows aside): stop
// (exit 2), or roll back to the last checkpoint and skip that step's batch.
enum class OnNonFinite { stop, rollback };

// model.micro_batch_size: a positive integer, or "auto" (planned from the bubble and memory limits).
struct MicroBatchSize {
  bool automatic = false;
  long value = 1;
};

// checkpoint.load: "auto" (resume from checkpoint.dir/latest when there is one), "none", or a path.
struct CheckpointLoad {
  enum class Mode { automatic, none, path } mode = Mode::automatic;
  std::string path;
};

std::ostream& operator<<(std::ostream& os, ComputeDevice v);
std::ostream& operator<<(std::ostream& os, CommBackend v);
std::ostream& operator<<(std::ostream& os, PipelineSchedule v);
std::ostream& operator<<(std::ostream& os, Precision v);
std::ostream& operator<<(std::ostream& os, Normalization v);
std::ostream& operator<<(std::ostream& os, RopeScaling v);
std::ostream& operator<<(std::ostream& os, RecomputeGranularity v);
std::ostream& operator<<(std::ostream& os, RecomputeMethod v);
std::ostream& operator<<(std::ostream& os, PositionEmbedding v);
std::ostream& operator<<(std::ostream& os, DataFormat v);
std::ostream& operator<<(std::ostream& os, MoeLoadBalancing v);
std::ostream& operator<<(std::ostream& os, const CapacityFactor& v);
std::ostream& operator<<(std::ostream& os, const DataSplit& v);
std::ostream& operator<<(std::ostream& os, const StepList& v);
std::ostream& operator<<(std::ostream& os, OnNonFinite v);
std::ostream& operator<<(std::ostream& os, LayoutChoice v);
std::ostream& operator<<(std::ostream& os, const MicroBatchSize& v);
std::ostream& operator<<(std::ostream& os, const CheckpointLoad& v);
const char* to_string(PipelineSchedule v);
const char* to_string(Precision v);  // fp32, bf16, fp16

// Boost.ProgramOptions parsers (found by argument-dependent lookup).
void validate(boost::any& out, const std::vector<std::string>& values, ComputeDevice*, int);
void validate(boost::any& out, const std::vector<std::string>& values, CommBackend*, int);
void validate(boost::any& out, const std::vector<std::string>& values, PipelineSchedule*, int);
void validate(boost::any& out, const std::vector<std::string>& values, Precision*, int);
void validate(boost::any& out, const std::vector<std::string>& values, Normalization*, int);
void validate(boost::any& out, const std::vector<std::string>& values, RopeScaling*, int);
void validate(boost::any& out, const std::vector<std::string>& values, RecomputeGranularity*, int);
void validate(boost::any& out, const std::vector<std::string>& values, RecomputeMethod*, int);
void validate(boost::any& out, const std::vector<std::string>& values, PositionEmbedding*, int);
void validate(boost::any& out, const std::vector<std::string>& values, DataFormat*, int);
void validate(boost::any& out, const std::vector<std::string>& values, MoeLoadBalancing*, int);
void validate(boost::any& out, const std::vector<std::string>& values, CapacityFactor*, int);
void validate(boost::any& out, const std::vector<std::string>& values, DataSplit*, int);
void validate(boost::any& out, const std::vector<std::string>& values, StepList*, int);
void validate(boost::any& out, const std::vector<std::string>& values, OnNonFinite*, int);
void validate(boost::any& out, const std::vector<std::string>& values, LayoutChoice*, int);
void validate(boost::any& out, const std::vector<std::string>& values, MicroBatchSize*, int);
void validate(boost::any& out, const std::vector<std::string>& values, CheckpointLoad*, int);

}  // namespace dtrain
