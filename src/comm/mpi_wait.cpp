// mpi_wait_all: MPI_Waitall where every rank has a core; where ranks share cores (Open MPI yields when
// idle, or DTRAIN_MPI_WAIT=sleep), MPI_Testall polled for a short spin, then with sleeps between polls
// that double up to a cap.
#include "comm/mpi_wait.hpp"

#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <string>

#include "common/error.hpp"

namespace dtrain {
namespace {

// A wait shorter than this never sleeps: collectives whose ranks are all at hand finish within it.
// Then sleeps of 20 us, 40 us, ... 500 us: a long wait costs a wake-up every half millisecond and ends
// at most that late. Chosen by measurement on 2 cores (docs/measurements/mpi-waits.json): a shorter spin
// made back-to-back collectives slower, a longer one kept the cost of yielding to a busy process.
constexpr auto kSpin = std::chrono::microseconds(2000);
constexpr long kFirstSleepNs = 20'000, kMaxSleepNs = 500'000;

// Open MPI's mpi_yield_when_idle: true when it launched more ranks on this node than it has slots
// (or when a user sets OMPI_MCA_mpi_yield_when_idle=1), read through the MPI tool interface;
// false where the variable is unknown (another MPI), which leaves that MPI's own waits.
bool ranks_share_cores() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return false;
  bool yields = false;
  int index = 0, count = 0;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    std::array<unsigned char, 16> value{};  // a bool in Open MPI: zero-filled, so any width reads right
    if (count == 1 && MPI_T_cvar_read(handle, value.data()) == MPI_SUCCESS)
      yields = std::any_of(value.begin(), value.end(), [](unsigned char b) { return b != 0; });
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return yields;
}

// Polls the requests for `spin`, then sleeps between polls, each sleep twice the last up to the cap.
void poll_then_sleep(int count, MPI_Request* requests, std::chrono::microseconds spin) {
  const auto start = std::chrono::steady_clock::now();
  long sleep_ns = kFirstSleepNs;
  for (int done = 0;;) {
    MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (std::chrono::steady_clock::now() - start < spin) continue;
    const timespec pause{0, sleep_ns};
    nanosleep(&pause, nullptr);
    sleep_ns = std::min(2 * sleep_ns, kMaxSleepNs);
  }
}

}  // namespace

WaitPolicy parse_wait_policy(const char* value) {
  if (!value) return WaitPolicy::automatic;
  const std::string v(value);
  if (v == "auto") return WaitPolicy::automatic;
  if (v == "poll") return WaitPolicy::poll;
  if (v == "sleep") return WaitPolicy::sleep;
  throw UserError("DTRAIN_MPI_WAIT='" + v.substr(0, 80) +
                  "' is not a way to wait; use auto (sleep where Open MPI yields: more ranks than cores), poll or sleep");
}

bool mpi_waits_sleep() {
  static const bool sleeps = [] {
    switch (parse_wait_policy(std::getenv("DTRAIN_MPI_WAIT"))) {
      case WaitPolicy::poll: return false;
      case WaitPolicy::sleep: return true;
      case WaitPolicy::automatic: break;
    }
    return ranks_share_cores();
  }();
  return sleeps;
}

void mpi_wait_all(int count, MPI_Request* requests) {
  if (mpi_waits_sleep())
    poll_then_sleep(count, requests, kSpin);
  else
    MPI_CHECK(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
}

void mpi_wait_sleeping(MPI_Request& request) { poll_then_sleep(1, &request, std::chrono::microseconds(0)); }

}  // namespace dtrain
