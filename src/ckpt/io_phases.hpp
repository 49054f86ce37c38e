// Where checkpoint I/O time goes: seconds per phase of writing and reading shards (dataset bytes,
// finiteness checks and piece hashes, attributes and file metadata, close, fsync, whole-file hashes,
// publication), added up by scoped timers in the HDF5 and shard code. A save or load takes the
// totals of its phases (take_io_phases) and reports the slowest rank's (describe_io_phases).
#pragma once
#include <array>
#include <string>

namespace dtrain {

enum class IoPhase : int { data, checks, metadata, close, fsync, file_hash, publish, count };
constexpr int kIoPhases = static_cast<int>(IoPhase::count);
using IoPhaseSeconds = std::array<double, kIoPhases>;

// The seconds added since the last take, per phase; resets them. Phases are added by any thread (an
// asynchronous save's writer); a process runs one save or load at a time.
IoPhaseSeconds take_io_phases();

// "data 0.120 s, checks 0.030 s, ..." for the phases that took any time.
std::string describe_io_phases(const IoPhaseSeconds& seconds);

// Adds the time from construction to destruction to one phase.
class IoPhaseTimer {
 public:
  explicit IoPhaseTimer(IoPhase phase);
  ~IoPhaseTimer();
  IoPhaseTimer(const IoPhaseTimer&) = delete;
  IoPhaseTimer& operator=(const IoPhaseTimer&) = delete;

 private:
  IoPhase phase_;
  long long start_ns_;
};

}  // namespace dtrain
