// Trace: events kept in memory during the run, written as one JSON file per rank at the end.
#include "runtime/trace.hpp"

#include <cstdio>
#include <filesystem>


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
  std::FILE* f = std::fopen(path_.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "dtrain: rank %d: warning: cannot write trace file '%s'\n", rank_, path_.c_str());
    return;
  }
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  std::fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}", rank_, rank_);
  for (const auto& e : events_)
    std::fprintf(f, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, \"ts\": %.3f, \"dur\": %.3f}",
                 e.name.c_str(), e.category, rank_, e.start, e.end - e.start);
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
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
