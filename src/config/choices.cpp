// Parsing and printing of the word-valued keys.
#include "config/choices.hpp"

#include <boost/program_options/errors.hpp>
#include <boost/program_options/value_semantic.hpp>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string_view>

namespace po = boost::program_options;

namespace dtrain {
namespace {

const std::string& single(const boost::any& out, const std::vector<std::string>& values) {
  po::validators::check_first_occurrence(out);
  return po::validators::get_single_string(values);
}

[[noreturn]] void bad_word(const std::string& value, const std::string& accepted) {
  po::error_with_option_name e("'%canonical_option%' = '%value%' is not accepted; use " + accepted);
  e.set_substitute("value", value);
  throw e;
}

}  // namespace

const char* to_string(PipelineSchedule v) {
  switch (v) {
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved";
    case PipelineSchedule::afab: return "afab";
    case PipelineSchedule::zb_h1: return "zb-h1";
    case PipelineSchedule::zbv: return "zbv";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, ComputeDevice v) { return os << (v == ComputeDevice::cuda ? "cuda" : "cpu"); }
std::ostream& operator<<(std::ostream& os, CommBackend v) {
  switch (v) {
    case CommBackend::automatic: return os << "auto";
    case CommBackend::nccl: return os << "nccl";
    case CommBackend::mpi: return os << "mpi";
  }
  return os;
}
std::ostream& operator<<(std::ostream& os, PipelineSchedule v) { return os << to_string(v); }
const char* to_string(Precision v) {
  return v == Precision::bf16 ? "bf16" : v == Precision::fp16 ? "fp16" : v == Precision::fp8 ? "fp8" : "fp32";
}
std::ostream& operator<<(std::ostream& os, Precision v) { return os << to_string(v); }
std::ostream& operator<<(std::ostream& os, Normalization v) { return os << (v == Normalization::rmsnorm ? "RMSNorm" : "LayerNorm"); }
std::ostream& operator<<(std::ostream& os, RopeScaling v) { return os << (v == RopeScaling::llama3 ? "llama3" : "none"); }
std::ostream& operator<<(std::ostream& os, RecomputeGranularity v) {
  return os << (v == RecomputeGranularity::full ? "full" : v == RecomputeGranularity::selective ? "selective" : "none");
}
std::ostream& operator<<(std::ostream& os, RecomputeMethod v) { return os << (v == RecomputeMethod::block ? "block" : "uniform"); }
std::ostream& operator<<(std::ostream& os, PositionEmbedding v) {
  return os << (v == PositionEmbedding::rope ? "rope" : "learned_absolute");
}
std::ostream& operator<<(std::ostream& os, DataFormat v) { return os << (v == DataFormat::megatron ? "megatron" : "dtrain"); }
std::ostream& operator<<(std::ostream& os, MoeLoadBalancing v) {
  return os << (v == MoeLoadBalancing::none ? "none" : "aux_loss");
}
std::ostream& operator<<(std::ostream& os, const CapacityFactor& v) {
  if (!v.set) return os << "none";
  char buf[64];  // the shortest text that reads back as the same double
  return os << std::string_view(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v.value).ptr - buf));
}
std::ostream& operator<<(std::ostream& os, const DataSplit& v) {
  return os << v.weights[0] << ',' << v.weights[1] << ',' << v.weights[2];
}
std::ostream& operator<<(std::ostream& os, const StepList& v) {
  for (std::size_t i = 0; i < v.steps.size(); ++i) os << (i ? "," : "") << v.steps[i];
  return os;
}
std::ostream& operator<<(std::ostream& os, OnNonFinite v) { return os << (v == OnNonFinite::rollback ? "rollback" : "stop"); }
std::ostream& operator<<(std::ostream& os, LayoutChoice v) { return os << (v == LayoutChoice::automatic ? "auto" : "manual"); }
bool StepList::contains(long step) const { return std::binary_search(steps.begin(), steps.end(), step); }
std::ostream& operator<<(std::ostream& os, const MicroBatchSize& v) {
  if (v.automatic) return os << "auto";
  return os << v.value;
}
std::ostream& operator<<(std::ostream& os, const CheckpointLoad& v) {
  switch (v.mode) {
    case CheckpointLoad::Mode::automatic: return os << "auto";
    case CheckpointLoad::Mode::none: return os << "none";
    case CheckpointLoad::Mode::path: return os << v.path;
  }
  return os;
}

void validate(boost::any& out, const std::vector<std::string>& values, ComputeDevice*, int) {
  const std::string& s = single(out, values);
  if (s == "cpu") out = ComputeDevice::cpu;
  else if (s == "cuda") out = ComputeDevice::cuda;
  else bad_word(s, "cpu or cuda");
}

void validate(boost::any& out, const std::vector<std::string>& values, Normalization*, int) {
  const std::string& s = single(out, values);
  if (s == "LayerNorm") out = Normalization::layernorm;
  else if (s == "RMSNorm") out = Normalization::rmsnorm;
  else bad_word(s, "LayerNorm or RMSNorm");
}

void validate(boost::any& out, const std::vector<std::string>& values, RecomputeGranularity*, int) {
  const std::string& s = single(out, values);
  if (s == "none") out = RecomputeGranularity::none;
  else if (s == "selective") out = RecomputeGranularity::selective;
  else if (s == "full") out = RecomputeGranularity::full;
  else bad_word(s, "none, selective or full");
}

void validate(boost::any& out, const std::vector<std::string>& values, RecomputeMethod*, int) {
  const std::string& s = single(out, values);
  if (s == "uniform") out = RecomputeMethod::uniform;
  else if (s == "block") out = RecomputeMethod::block;
  else bad_word(s, "uniform or block");
}

void validate(boost::any& out, const std::vector<std::string>& values, RopeScaling*, int) {
  const std::string& s = single(out, values);
  if (s == "none") out = RopeScaling::none;
  else if (s == "llama3") out = RopeScaling::llama3;
  else bad_word(s, "none or llama3");
}

void validate(boost::any& out, const std::vector<std::string>& values, PositionEmbedding*, int) {
  const std::string& s = single(out, values);
  if (s == "learned_absolute") out = PositionEmbedding::learned_absolute;
  else if (s == "rope") out = PositionEmbedding::rope;
  else bad_word(s, "learned_absolute or rope");
}

void validate(boost::any& out, const std::vector<std::string>& values, CommBackend*, int) {
  const std::string& s = single(out, values);
  if (s == "auto") out = CommBackend::automatic;
  else if (s == "nccl") out = CommBackend::nccl;
  else if (s == "mpi") out = CommBackend::mpi;
  else bad_word(s, "auto, nccl or mpi");
}

void validate(boost::any& out, const std::vector<std::string>& values, PipelineSchedule*, int) {
  const std::string& s = single(out, values);
  if (s == "1f1b") out = PipelineSchedule::one_f_one_b;
  else if (s == "interleaved") out = PipelineSchedule::interleaved;
  else if (s == "afab") out = PipelineSchedule::afab;
  else if (s == "zb-h1") out = PipelineSchedule::zb_h1;
  else if (s == "zbv") out = PipelineSchedule::zbv;
  else bad_word(s, "1f1b, interleaved, afab, zb-h1 or zbv");
}

void validate(boost::any& out, const std::vector<std::string>& values, Precision*, int) {
  const std::string& s = single(out, values);
  if (s == "fp32") out = Precision::fp32;
  else if (s == "bf16") out = Precision::bf16;
  else if (s == "fp16") out = Precision::fp16;
  else if (s == "fp8") out = Precision::fp8;
  else bad_word(s, "fp32, bf16, fp16 or fp8");
}

void validate(boost::any& out, const std::vector<std::string>& values, DataFormat*, int) {
  const std::string& s = single(out, values);
  if (s == "dtrain") out = DataFormat::dtrain;
  else if (s == "megatron") out = DataFormat::megatron;
  else bad_word(s, "dtrain or megatron");
}

void validate(boost::any& out, const std::vector<std::string>& values, MoeLoadBalancing*, int) {
  const std::string& s = single(out, values);
  if (s == "aux_loss") out = MoeLoadBalancing::aux_loss;
  else if (s == "none") out = MoeLoadBalancing::none;
  else bad_word(s, "aux_loss or none");
}

void validate(boost::any& out, const std::vector<std::string>& values, CapacityFactor*, int) {
  const std::string& s = single(out, values);
  CapacityFactor v;
  if (s != "none") {
    char* end = nullptr;
    v.set = true;
    v.value = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v.value)) bad_word(s, "none (dropless) or a number > 0 (e.g. 1.25)");
  }
  out = v;
}

void validate(boost::any& out, const std::vector<std::string>& values, DataSplit*, int) {
  const std::string& s = single(out, values);
  const char* accepted = "one to three weights train,valid,test, each >= 0 and train > 0 (e.g. 969,30,1)";
  DataSplit v;
  int n = 0;
  for (std::size_t at = 0; at <= s.size(); ++n) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    const std::string part = s.substr(at, comma - at);
    char* end = nullptr;
    const double w = n < 3 && !part.empty() ? std::strtod(part.c_str(), &end) : -1.0;
    if (w < 0 || *end != '\0' || !std::isfinite(w)) bad_word(s, accepted);
    v.weights[n] = w;
    at = comma + 1;
  }
  for (; n < 3; ++n) v.weights[n] = 0;
  if (!(v.weights[0] > 0)) bad_word(s, accepted);
  out = v;
}

void validate(boost::any& out, const std::vector<std::string>& values, StepList*, int) {
  const std::string& s = single(out, values);
  const char* accepted = "a comma-separated list of 1-based steps, e.g. 1200,3401 (empty = none)";
  StepList v;
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    const std::string part = s.substr(at, comma - at);
    char* end = nullptr;
    errno = 0;
    const long step = part.empty() ? -1 : std::strtol(part.c_str(), &end, 10);
    if (step < 1 || *end != '\0' || errno == ERANGE) bad_word(s, accepted);  // ERANGE: beyond a long, not its largest value
    v.steps.push_back(step);
    at = comma + 1;
  }
  std::sort(v.steps.begin(), v.steps.end());
  v.steps.erase(std::unique(v.steps.begin(), v.steps.end()), v.steps.end());
  out = v;
}

void validate(boost::any& out, const std::vector<std::string>& values, LayoutChoice*, int) {
  const std::string& s = single(out, values);
  if (s == "manual") out = LayoutChoice::manual;
  else if (s == "auto") out = LayoutChoice::automatic;
  else bad_word(s, "manual or auto");
}

void validate(boost::any& out, const std::vector<std::string>& values, OnNonFinite*, int) {
  const std::string& s = single(out, values);
  if (s == "stop") out = OnNonFinite::stop;
  else if (s == "rollback") out = OnNonFinite::rollback;
  else bad_word(s, "stop or rollback");
}

void validate(boost::any& out, const std::vector<std::string>& values, MicroBatchSize*, int) {
  const std::string& s = single(out, values);
  MicroBatchSize v;
  if (s == "auto") {
    v.automatic = true;
  } else {
    errno = 0;
    char* end = nullptr;
    v.value = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE || v.value < 1) bad_word(s, "a positive integer or auto");
  }
  out = v;
}

void validate(boost::any& out, const std::vector<std::string>& values, CheckpointLoad*, int) {
  const std::string& s = single(out, values);
  CheckpointLoad v;
  if (s == "auto") v.mode = CheckpointLoad::Mode::automatic;
  else if (s == "none") v.mode = CheckpointLoad::Mode::none;
  else if (s.empty()) bad_word(s, "auto, none or the path of a checkpoint");
  else v.mode = CheckpointLoad::Mode::path, v.path = s;
  out = v;
}

}  // namespace dtrain
