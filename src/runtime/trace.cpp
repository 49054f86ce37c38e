// Trace: events kept in memory during the run, written as one JSON file per rank at the end.
#include "runtime/trace.hpp"

#include <cstdio>
#include <filesystem>

#include "common/error.hpp"
#include "common/staged_file.hpp"

namespace dtrain {

Trace::Trace(int rank, const std::string& prefix, const std::function<void()>& align) : enabled_(!prefix.empty()), rank_(rank) {
  if (!enabled_) return;
  path_ = prefix + ".rank" + std::to_string(rank_) + ".json";
  const auto parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  align();
  origin_ = std::chrono::steady_clock::now();
  events_.reserve(1 << 16);
}

Trace::~Trace() {
  if (!enabled_) return;
  std::string text = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  char line[512];
  std::snprintf(line, sizeof line, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}", rank_, rank_);
  text += line;
  for (const auto& e : events_) {
    text += ",\n{\"name\": \"" + e.name + "\", \"cat\": \"" + e.category + "\", \"ph\": \"X\", \"pid\": " + std::to_string(rank_);
    std::snprintf(line, sizeof line, ", \"tid\": 0, \"ts\": %.3f, \"dur\": %.3f}", e.start, e.end - e.start);
    text += line;
  }
  text += "\n]}\n";
  try {
    write_file_atomically(path_, text, "trace file");
  } catch (const UserError& e) {  // at the end of a run, on one rank: a warning, the run's outcome stands
    std::fprintf(stderr, "dtrain: rank %d: warning: %s\n", rank_, e.what());
  }
}

double Trace::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_).count();
}

void Trace::add(const std::string& name, const char* category, double start_us, double end_us) {
  if (enabled_) events_.push_back({name, category, start_us, end_us});
}

Trace::Span::Span(Trace* t, std::string name, const char* category)
    : t_(t && t->enabled() ? t : nullptr), name_(std::move(name)), category_(category), start_(t_ ? t_->now_us() : 0.0) {}

Trace::Span::~Span() {
  if (t_) t_->add(name_, category_, start_, t_->now_us());
}

}  // namespace dtrain
