// Per-rank timeline in Chrome trace format (logging.trace_file = PREFIX writes PREFIX.rank<R>.json):
// forward/backward per micro-batch, point-to-point waits, gradient reductions, the optimizer step and
// checkpoint I/O, as complete events ("ph": "X") on one track per rank. tools/trace-merge joins the
// ranks' files into one timeline for Perfetto or chrome://tracing: a picture of the schedule and its
// bubbles. Times are microseconds since a barrier that all ranks passed together.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace dtrain {

class Trace {
 public:
  // rank: this process's world rank. align: run on every rank before the time origin is taken (a
  // world barrier, so the ranks share one origin). An empty prefix disables tracing (align not run).
  Trace(int rank, const std::string& prefix, const std::function<void()>& align);
  ~Trace();  // writes the file
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;
  bool enabled() const { return enabled_; }
  double now_us() const;
  void add(const std::string& name, const char* category, double start_us, double end_us);

  class Span {  // an event from construction to destruction; no-op on a null or disabled trace
   public:
    Span(Trace* t, std::string name, const char* category);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    Trace* t_;
    std::string name_;
    const char* category_;
    double start_;
  };

 private:
  struct Event {
    std::string name;
    const char* category;
    double start, end;
  };
  bool enabled_;
  int rank_ = 0;
  std::string path_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<Event> events_;
};

}  // namespace dtrain
