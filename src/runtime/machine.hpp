// Facts about the machine a rank runs on: the cores it may use (its CPU affinity, which srun and
// mpirun set), the memory of its node (physical memory, or the cgroup limit of the job when lower) and
// the process's own resident memory and age.
#pragma once
#include <cstddef>
#include <vector>

namespace dtrain {

// CPUs in this process's affinity mask (at least 1).
int cores_available();
// The CPU ids of this process's affinity mask.
std::vector<int> affinity_cpus();
// Bytes of memory this process's node offers: physical memory, capped by a cgroup memory limit.
std::size_t node_memory_bytes();
// This process's resident memory now (VmRSS) and at most so far (VmHWM), in bytes.
std::size_t resident_bytes();
std::size_t peak_resident_bytes();
// Seconds since this process started (the launcher's exec included), from /proc/self/stat's start time
// against /proc/uptime; 0 where they cannot be read.
double seconds_since_process_start();

}  // namespace dtrain
