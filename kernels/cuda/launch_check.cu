// The check after every kernel launch (DTRAIN_LAUNCH_CHECK), and its two diagnostic modes read once from
// the environment: DTRAIN_SYNC_LAUNCH=1 waits for each launch so that a kernel that faults is named at its
// own launch (not at the next synchronisation, far away); DTRAIN_KERNEL_PROFILE=FILE also waits and
// charges to the launch's name two times: the wait at its check (the device time left after the launch
// returned: the kernel's time, less the host's launch overhead) and the host time before it (from the
// previous check's end to this check: host work between launches, the launch calls themselves,
// anything not a checked launch), then writes a table (seconds, share, calls, host seconds, name; by
// device seconds) to FILE (FILE.rank<R> under mpirun with several ranks) when the process ends. Both
// slow a run down and are for finding faults and costs, not for training.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/cuda/device_math.cuh"

namespace dtrain::kernels::cuda {
namespace {

struct LaunchProfile {
  std::string path;
  struct Entry {
    long calls = 0;
    double device = 0.0, host = 0.0;  // seconds waited at the check; seconds before it
  };
  std::map<std::string, Entry> seconds;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();

  ~LaunchProfile() {
    if (path.empty() || seconds.empty()) return;
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = std::getenv("SLURM_PROCID");
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (!size) size = std::getenv("SLURM_NTASKS");
    const std::string file = (size && std::atoi(size) > 1 && rank) ? path + ".rank" + rank : path;
    std::vector<std::pair<std::string, Entry>> rows(seconds.begin(), seconds.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.device > b.second.device; });
    double total = 0.0, host = 0.0;
    for (const auto& r : rows) total += r.second.device, host += r.second.host;
    char line[1024];
    std::snprintf(line, sizeof line,
                  "# device time per launch (each launch waited for), %.3f s in all; host time before the launches %.3f s\n"
                  "# seconds\tshare\tcalls\thost_seconds\tname\n",
                  total, host);
    std::string text = line;
    for (const auto& r : rows) {
      std::snprintf(line, sizeof line, "%.6f\t%.4f\t%ld\t%.6f\t", r.second.device, total > 0 ? r.second.device / total : 0.0,
                    r.second.calls, r.second.host);
      text += line + r.first + "\n";
    }
    std::FILE* f = std::fopen(file.c_str(), "w");
    const bool written = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const int err = errno;
    const bool closed = f && std::fclose(f) == 0;
    if (!written || !closed)  // at exit: a warning, the run's outcome stands
      std::fprintf(stderr, "warning: DTRAIN_KERNEL_PROFILE: cannot write %s: %s\n", file.c_str(), std::strerror(written ? errno : err));
  }
};

struct LaunchMode {
  bool sync = false;
  LaunchProfile profile;
  LaunchMode() {
    const char* s = std::getenv("DTRAIN_SYNC_LAUNCH");
    sync = s && *s && std::strcmp(s, "0") != 0;
    const char* p = std::getenv("DTRAIN_KERNEL_PROFILE");
    if (p && *p) profile.path = p;
  }
  bool wait() const { return sync || !profile.path.empty(); }
};

LaunchMode& mode() {
  static LaunchMode m;
  return m;
}

}  // namespace

bool launch_checks_wait() { return mode().wait(); }

void check_launch(const char* what, const char* file, int line) {
  const auto entered = std::chrono::steady_clock::now();
  LaunchMode& m = mode();
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess)
    fatal(std::string("CUDA launch failed at ") + file + ":" + std::to_string(line) + " (" + what + "): " + cudaGetErrorString(rc) +
          (m.wait() ? "" : "; an earlier kernel may have faulted: rerun with DTRAIN_SYNC_LAUNCH=1 to name it"));
  if (!m.wait()) return;
  const cudaError_t ran = cudaDeviceSynchronize();
  if (ran != cudaSuccess)
    fatal(std::string("CUDA kernel ") + what + " launched at " + file + ":" + std::to_string(line) + " failed: " + cudaGetErrorString(ran));
  if (m.profile.path.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  auto& entry = m.profile.seconds[what];
  entry.calls += 1;
  entry.device += std::chrono::duration<double>(now - entered).count();
  entry.host += std::chrono::duration<double>(entered - m.profile.last).count();
  m.profile.last = now;
}

}  // namespace dtrain::kernels::cuda
