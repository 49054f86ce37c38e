// The per-phase checkpoint I/O clocks: one atomic nanosecond counter per phase.
#include "ckpt/io_phases.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>

namespace dtrain {
namespace {

std::array<std::atomic<long long>, kIoPhases> totals_ns{};

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr const char* kNames[kIoPhases] = {"data", "checks", "metadata", "close", "fsync", "file hash", "publish"};

}  // namespace

IoPhaseSeconds take_io_phases() {
  IoPhaseSeconds s{};
  for (int i = 0; i < kIoPhases; ++i) s[i] = static_cast<double>(totals_ns[i].exchange(0)) * 1e-9;
  return s;
}

std::string describe_io_phases(const IoPhaseSeconds& seconds) {
  std::string out;
  for (int i = 0; i < kIoPhases; ++i) {
    if (seconds[i] <= 0) continue;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%s %.3f s", out.empty() ? "" : ", ", kNames[i], seconds[i]);
    out += buf;
  }
  return out;
}

IoPhaseTimer::IoPhaseTimer(IoPhase phase) : phase_(phase), start_ns_(now_ns()) {}

IoPhaseTimer::~IoPhaseTimer() { totals_ns[static_cast<int>(phase_)] += now_ns() - start_ns_; }

}  // namespace dtrain
