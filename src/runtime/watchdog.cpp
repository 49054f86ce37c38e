// Watchdog thread: polls a few times a second; reports and aborts through the one error path.
#include "runtime/watchdog.hpp"

#include <mpi.h>

#include <cstdio>
#include <utility>

#include "common/error.hpp"

namespace dtrain {
namespace {

constexpr double kWaitingGraceS = 1.0;  // see the step timeout below

}  // namespace

Watchdog::Watchdog(int world_rank, double op_timeout, double step_timeout, std::string node)
    : rank_(world_rank), node_(std::move(node)), op_timeout_(op_timeout), step_timeout_(step_timeout), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::step_begin(int step) {
  std::lock_guard<std::mutex> lock(mu_);
  in_step_ = true;
  step_ = step;
  step_start_ = Clock::now();
  phase_ = "starting the step";
}

void Watchdog::step_end() {
  std::lock_guard<std::mutex> lock(mu_);
  in_step_ = false;
}

void Watchdog::phase(const char* name, int micro_batch, int chunk, int stage) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s of micro-batch %d, chunk %d, pipeline stage %d", name, micro_batch, chunk, stage);
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = buf;
}

Watchdog::Scope::Scope(Watchdog* w, const OpInfo& op) : w_(w) {
  if (!w_) return;
  std::lock_guard<std::mutex> lock(w_->mu_);
  w_->in_op_ = true;
  w_->op_ = op;
  w_->op_start_ = Clock::now();
}

Watchdog::Scope::~Scope() {
  if (!w_) return;
  std::lock_guard<std::mutex> lock(w_->mu_);
  w_->in_op_ = false;
  w_->comm_seconds_ += std::chrono::duration<double>(Clock::now() - w_->op_start_).count();
}

double Watchdog::take_comm_seconds() {
  std::lock_guard<std::mutex> lock(mu_);
  const double s = comm_seconds_;
  comm_seconds_ = 0.0;
  return s;
}

void Watchdog::fire(const std::string& what) {
  std::fprintf(stderr, "dtrain: rank %d%s%s: error: hang watchdog: %s; aborting the job (exit %d: a hang, which a restart may clear)\n",
               rank_, node_.empty() ? "" : " on node ", node_.c_str(), what.c_str(), kHangExit);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kHangExit);
  std::abort();
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
    const auto now = Clock::now();
    char buf[512];
    if (in_op_ && op_timeout_ > 0) {
      const double waited = std::chrono::duration<double>(now - op_start_).count();
      if (waited > op_timeout_) {
        std::snprintf(buf, sizeof buf,
                      "stuck for %.1f s (system.collective_timeout_s=%g) in %s (group %s, peer rank %d, %ld bytes, "
                      "micro-batch %d, pipeline stage %d) during step %d",
                      waited, op_timeout_, op_.name, op_.group[0] ? op_.group : "-", op_.peer, op_.bytes, op_.micro_batch,
                      op_.stage, step_ + 1);
        fire(buf);
      }
    }
    if (in_step_ && step_timeout_ > 0) {
      const double ran = std::chrono::duration<double>(now - step_start_).count();
      // A rank waiting in communication gives a rank busy outside it (the likely culprit: a wedged GPU,
      // a stuck kernel) a moment to report itself first, so that the job's last words name it.
      const double grace = in_op_ ? kWaitingGraceS : 0.0;
      if (ran > step_timeout_ + grace) {
        std::snprintf(buf, sizeof buf, "step %d has run for %.1f s (system.step_timeout_s=%g), %s %s", step_ + 1, ran,
                      step_timeout_, in_op_ ? "waiting in" : "busy in", in_op_ ? op_.name : phase_.c_str());
        fire(buf);
      }
    }
  }
}

}  // namespace dtrain
