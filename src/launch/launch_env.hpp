// Who am I in the job: ranks, node and local rank, job id, node list. No MASTER_ADDR, no ssh:
// the launcher's environment and MPI itself are the only sources.
// Order: Slurm task variables (srun), then Open MPI's (mpirun), then the ranks that share memory (MPI).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "comm/host_comm.hpp"

namespace dtrain {

struct LaunchEnv {
  std::string launcher = "mpi";  // "srun", "mpirun" or "mpi" (neither variable set)
  int world_rank = 0;
  int world_size = 1;
  int local_rank = -1;           // rank among the ranks on this node
  int local_size = -1;
  int node_id = -1;              // index of this node in the job
  int num_nodes = -1;
  std::string job_id;            // SLURM_JOB_ID, or "" outside Slurm
  std::string node_name;         // SLURMD_NODENAME, or the MPI processor name
  std::vector<std::string> job_nodes;  // expanded SLURM_JOB_NODELIST (empty outside Slurm)
  // The ranks on this node (MPI_COMM_TYPE_SHARED), split once by detect_launch_env and kept for the
  // process's life: the node's start-up measurements use it (null from launch_env_from_variables).
  HostComm node;
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads what the launcher's variables say, for an MPI rank/size. Fields the launcher does not give
// stay -1. Inconsistencies (SLURM_PROCID != MPI rank, SLURM_NTASKS != world size, ...) are appended to
// `problems` as one-line explanations with the likely fix.
LaunchEnv launch_env_from_variables(const EnvLookup& env, int mpi_rank, int mpi_size,
                                    std::vector<std::string>& problems);

// Collective over `world`: the variables, completed from the node communicator (the ranks that share
// memory, kept in `node`) where the launcher gave nothing. Aborts the job (naming the rank) on an
// inconsistency.
LaunchEnv detect_launch_env(HostComm world);

// Node name of every rank (for the layout report). Collective.
std::vector<std::string> gather_node_names(HostComm world, const LaunchEnv& me);

}  // namespace dtrain
