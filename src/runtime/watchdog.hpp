// The hang watchdog: a thread per rank that knows what the rank is doing (a communication operation,
// or the compute phase of the step) and for how long. When an operation exceeds
// system.collective_timeout_s, or a step exceeds system.step_timeout_s, it prints which rank, which
// operation (name, group, peer, bytes, micro-batch, pipeline stage) and how long, then aborts the
// whole job, so a hang names the guilty rank instead of waiting for the wall-clock limit.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dtrain {

struct OpInfo {
  const char* name = "";    // "recv activation", "allreduce", "checkpoint save", ...
  const char* group = "";   // "tp", "pp", "dp", "world", "embedding", ""
  int peer = -1;            // world rank of the partner of a point-to-point transfer
  long bytes = 0;
  int micro_batch = -1;
  int stage = -1;
};

class Watchdog {
 public:
  // Timeouts <= 0 disable that check. The thread starts at once.
  // node: where the rank runs, for its last words.
  Watchdog(int world_rank, double collective_timeout_s, double step_timeout_s, std::string node = "");
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void step_begin(int step);
  void step_end();
  // The compute phase of the step (what the rank does between communications).
  void phase(const char* name, int micro_batch, int chunk, int stage);
  // Seconds spent inside watched communication since the last call (for the straggler report).
  double take_comm_seconds();

  class Scope {  // a communication operation, from construction to destruction
   public:
    Scope(Watchdog* w, const OpInfo& op);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog* w_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  [[noreturn]] void fire(const std::string& what);
  int rank_;
  std::string node_;
  double op_timeout_, step_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool in_op_ = false, in_step_ = false;
  OpInfo op_;
  Clock::time_point op_start_, step_start_;
  int step_ = -1;
  double comm_seconds_ = 0.0;
  std::string phase_ = "starting the step";
  std::thread thread_;
};

// A scope on a possibly absent (null) watchdog: `auto w = watch(ps.watchdog(), {"allreduce", "dp", -1, bytes});`
inline Watchdog::Scope watch(Watchdog* w, const OpInfo& op) { return Watchdog::Scope(w, op); }

}  // namespace dtrain
