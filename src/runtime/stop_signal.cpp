// Stop-signal recording (async-signal-safe: one sig_atomic_t), and StartupStop's watcher thread.
#include "runtime/stop_signal.hpp"

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <string>

#include "common/error.hpp"

namespace dtrain {
namespace {

// The one piece of global state in dtrain: a signal handler can reach nothing else.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void record_stop_signal(int signo) { g_stop_signal = signo; }

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // The dtrain launcher blocks both before this process loads its libraries (src/launcher.cpp): one
  // that arrived meanwhile is pending and reaches the handler now.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGUSR1);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
}

int received_stop_signal() { return g_stop_signal; }

StartupStop::StartupStop(double grace_s) {
  watcher_ = std::thread([this, grace_s] {
    // The stop signals stay with the main thread, whose handler records them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGUSR1);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    using clock = std::chrono::steady_clock;
    clock::time_point seen{};
    std::unique_lock<std::mutex> lock(m_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(20), [this] { return done_; })) {
      const int signo = received_stop_signal();
      if (signo == 0) continue;
      if (seen == clock::time_point{}) seen = clock::now();
      if (std::chrono::duration<double>(clock::now() - seen).count() < grace_s) continue;
      end_job(kPreemptedExit, std::string("received ") + signal_name(signo) + " during start-up, before any step: nothing to save; "
              "ending the job with code " + std::to_string(kPreemptedExit) + " so that it can be requeued");
    }
  });
}

void StartupStop::done() {
  {
    std::lock_guard<std::mutex> lock(m_);
    if (done_) return;
    done_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

const char* signal_name(int signo) {
  switch (signo) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace dtrain
