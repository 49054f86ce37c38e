// Where the ranks compute and what moves their data, from system.device and system.comm_backend:
// the host and MPI; or a GPU per rank and NCCL (auto, when no two ranks of a node share a GPU, or
// asked for); or GPUs and MPI with device buffers staged through pinned host memory (asked for, or
// auto when ranks share a GPU, which NCCL refuses).
#pragma once
#include <string>

#include "comm/host_comm.hpp"
#include "config/choices.hpp"
#include "kernels/backend.hpp"
#include "launch/launch_env.hpp"

namespace dtrain {

struct Placement {
  kernels::Backend backend = kernels::Backend::host;
  bool nccl = false;
  std::string description;     // for the start-up line: "cpu + mpi", "cuda + nccl", ...
  double gpu_memory_share = 0;  // cuda: bytes of GPU memory per rank (its GPU's memory over the ranks on it)
  int gpu = -1;                 // cuda: the device this rank uses
  int compute_capability = 0;   // cuda: the lowest of the job's GPUs, major x 10 + minor
};

// Collective over world (every rank learns whether any rank shares its GPU). A GPU below sm_80
// (Turing) has no bf16: precision = bf16 there is a UserError on every rank.
Placement place_ranks(HostComm world, ComputeDevice device, CommBackend comm, Precision precision, const LaunchEnv& env);

}  // namespace dtrain
