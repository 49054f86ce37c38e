// cores_available / node_memory_bytes / peak_resident_bytes from sched_getaffinity, sysconf, the
// cgroup files and /proc/self/status; the process's age from /proc/self/stat and /proc/uptime.
#include "runtime/machine.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace dtrain {
namespace {

// A cgroup limit file's value in bytes, 0 when absent or unlimited ("max").
std::size_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return 0;
  try {
    return static_cast<std::size_t>(std::stoull(v));
  } catch (...) {
    return 0;
  }
}

// The lowest memory limit of this process's cgroup and its ancestors (v2), or of its memory cgroup
// (v1); 0 when there is none.
std::size_t cgroup_memory_limit() {
  std::ifstream self("/proc/self/cgroup");
  std::size_t lowest = 0;
  auto take = [&lowest](std::size_t limit) {
    if (limit > 0 && (lowest == 0 || limit < lowest)) lowest = limit;
  };
  for (std::string line; std::getline(self, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (controllers.empty()) {  // cgroup v2: every level of the hierarchy can limit
      for (;;) {
        take(cgroup_limit(("/sys/fs/cgroup" + path + "/memory.max").c_str()));
        if (path.empty() || path == "/") break;
        path = path.substr(0, path.rfind('/'));
      }
    } else if (controllers.find("memory") != std::string::npos) {
      take(cgroup_limit(("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes").c_str()));
    }
  }
  return lowest;
}

}  // namespace

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

int cores_available() { return std::max(1, static_cast<int>(affinity_cpus().size())); }

std::size_t node_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  std::size_t bytes = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
  const std::size_t limit = cgroup_memory_limit();
  if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  return bytes;
}

namespace {

// A "Name:   1234 kB" line of /proc/self/status, in bytes (0 when absent).
std::size_t status_kib(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, name.size() + 1, name + ":") == 0) {
      try {
        return static_cast<std::size_t>(std::stoull(line.substr(name.size() + 1))) * 1024;
      } catch (...) {
        return 0;
      }
    }
  return 0;
}

}  // namespace

std::size_t resident_bytes() { return status_kib("VmRSS"); }
std::size_t peak_resident_bytes() { return status_kib("VmHWM"); }

double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = 0;
  if (!std::getline(stat, line) || !(uptime >> up)) return 0;
  // Field 22 (starttime, in clock ticks since boot) counts from the field after the command's ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  unsigned long long ticks = 0;
  if (!(rest >> ticks)) return 0;
  return std::max(0.0, up - static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK)));
}

}  // namespace dtrain
