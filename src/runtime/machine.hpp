// Facts about the machine a rank runs on: the cores it may use (its CPU affinity, which srun and
// mpirun set), the memory of its node (physical memory, or the cgroup limit of the job when lower),
// and the most memory this process has held.
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
// The peak resident set of this process so far (VmHWM of /proc/self/status); 0 where unknown.
std::size_t peak_resident_bytes();

}  // namespace dtrain
