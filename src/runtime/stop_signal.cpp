// Stop-signal recording (async-signal-safe: one sig_atomic_t) and the step-boundary agreement.
#include "runtime/stop_signal.hpp"

#include <pthread.h>

#include <csignal>


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

const char* signal_name(int signo) {
  switch (signo) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace dtrain
