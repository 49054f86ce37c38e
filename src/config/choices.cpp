// Parsing and printing of the word-valued keys.
#include "config/choices.hpp"

#include <boost/program_options/errors.hpp>
#include <boost/program_options/value_semantic.hpp>

#include <cerrno>
#include <cstdlib>
#include <ostream>

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
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, Device v) { return os << (v == Device::cuda ? "cuda" : "cpu"); }
std::ostream& operator<<(std::ostream& os, PipelineSchedule v) { return os << to_string(v); }
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

void validate(boost::any& out, const std::vector<std::string>& values, Device*, int) {
  const std::string& s = single(out, values);
  if (s == "cpu") out = Device::cpu;
  else if (s == "cuda") out = Device::cuda;
  else bad_word(s, "cpu or cuda");
}

void validate(boost::any& out, const std::vector<std::string>& values, PipelineSchedule*, int) {
  const std::string& s = single(out, values);
  if (s == "1f1b") out = PipelineSchedule::one_f_one_b;
  else if (s == "interleaved") out = PipelineSchedule::interleaved;
  else if (s == "afab") out = PipelineSchedule::afab;
  else bad_word(s, "1f1b, interleaved or afab");
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
