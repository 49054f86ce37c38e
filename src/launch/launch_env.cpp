// Launch-environment detection (see launch_env.hpp): variables first, MPI as the fallback.
#include "launch/launch_env.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "comm/host_values.hpp"
#include "common/error.hpp"
#include "launch/hostlist.hpp"

namespace dtrain {
namespace {

// -1 when unset; -2 when set but not a non-negative integer.
int int_var(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (*end == '\0' && x >= 0) ? static_cast<int>(x) : -2;
}

std::string str_var(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v ? v : "";
}

}  // namespace

LaunchEnv launch_env_from_variables(const EnvLookup& env, int mpi_rank, int mpi_size,
                                    std::vector<std::string>& problems) {
  LaunchEnv e;
  e.world_rank = mpi_rank;
  e.world_size = mpi_size;
  e.job_id = str_var(env, "SLURM_JOB_ID");
  e.node_name = str_var(env, "SLURMD_NODENAME");
  const std::string nodelist = str_var(env, "SLURM_JOB_NODELIST");
  if (!nodelist.empty()) {
    try {
      e.job_nodes = expand_hostlist(nodelist);
    } catch (const UserError& err) {
      problems.push_back(std::string("SLURM_JOB_NODELIST: ") + err.what());
    }
  }

  // mpirun (ORTE) sets OMPI_COMM_WORLD_* for the processes it starts. Inside a Slurm allocation it
  // starts them through its own daemons, so their SLURM_PROCID is the daemon's, not the rank: when
  // OMPI_COMM_WORLD_RANK is present, the Slurm task variables do not describe this process.
  const bool started_by_mpirun = int_var(env, "OMPI_COMM_WORLD_RANK") != -1;
  const int slurm_procid = int_var(env, "SLURM_PROCID");
  if (!started_by_mpirun && slurm_procid != -1 && env("SLURM_STEP_ID")) {
    e.launcher = "srun";
    const int ntasks = int_var(env, "SLURM_NTASKS");
    if (slurm_procid != mpi_rank || (ntasks >= 0 && ntasks != mpi_size)) {
      problems.push_back("srun started task " + std::to_string(slurm_procid) + " of " + std::to_string(ntasks) +
                         " (SLURM_PROCID/SLURM_NTASKS) but MPI says rank " + std::to_string(mpi_rank) + " of " +
                         std::to_string(mpi_size) +
                         ": MPI did not connect to srun; launch with 'srun --mpi=pmix' (or set MpiDefault=pmix)");
    }
    e.local_rank = int_var(env, "SLURM_LOCALID");
    e.node_id = int_var(env, "SLURM_NODEID");
    e.num_nodes = int_var(env, "SLURM_STEP_NUM_NODES");
    if (e.num_nodes < 0) e.num_nodes = int_var(env, "SLURM_NNODES");
  } else if (started_by_mpirun) {
    e.launcher = "mpirun";
    const int rank = int_var(env, "OMPI_COMM_WORLD_RANK");
    const int size = int_var(env, "OMPI_COMM_WORLD_SIZE");
    if (rank != mpi_rank || (size >= 0 && size != mpi_size)) {
      problems.push_back("mpirun started rank " + std::to_string(rank) + " of " + std::to_string(size) +
                         " (OMPI_COMM_WORLD_RANK/SIZE) but MPI says rank " + std::to_string(mpi_rank) + " of " +
                         std::to_string(mpi_size) + ": the dtrain binary and mpirun come from different MPI installations");
    }
    e.local_rank = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK");
    e.local_size = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
  }
  for (int* f : {&e.local_rank, &e.local_size, &e.node_id, &e.num_nodes})
    if (*f == -2) {
      problems.push_back("a Slurm/Open MPI rank variable is not a non-negative integer; check the environment");
      *f = -1;
    }
  return e;
}

LaunchEnv detect_launch_env(HostComm world) {
  const int rank = world.rank(), size = world.size();
  std::vector<std::string> problems;
  LaunchEnv e = launch_env_from_variables([](const char* n) { return std::getenv(n); }, rank, size, problems);
  if (!problems.empty()) fatal(problems.front());

  // Shared-memory split: ground truth of which ranks share a node, used where the launcher is silent.
  MPI_Comm node_comm;
  MPI_CHECK(MPI_Comm_split_type(world.mpi(), MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm));
  e.node = node_comm;
  const int shm_rank = e.node.rank(), shm_size = e.node.size();
  int leader = rank;
  broadcast(e.node, &leader, 1, 0);
  std::vector<int> leaders(size);
  MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world.mpi()));
  std::vector<int> distinct = leaders;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (e.local_rank < 0) e.local_rank = shm_rank;
  if (e.local_size < 0) {
    // Slurm gives no per-node task count directly for heterogeneous layouts; count ranks on my node.
    e.local_size = e.launcher == "srun"
                       ? static_cast<int>(std::count(leaders.begin(), leaders.end(), leader))
                       : shm_size;
  }
  if (e.node_id < 0) e.node_id = static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), leader) - distinct.begin());
  if (e.num_nodes < 0) e.num_nodes = static_cast<int>(distinct.size());
  if (e.node_name.empty()) {
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    e.node_name = name;
  }
  return e;
}

std::vector<std::string> gather_node_names(HostComm world, const LaunchEnv& me) {
  constexpr int kLen = 64;
  char mine[kLen] = {0};
  std::strncpy(mine, me.node_name.c_str(), kLen - 1);
  std::vector<char> all(static_cast<std::size_t>(kLen) * me.world_size);
  MPI_CHECK(MPI_Allgather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, world.mpi()));
  std::vector<std::string> names;
  for (int r = 0; r < me.world_size; ++r) names.emplace_back(&all[static_cast<std::size_t>(r) * kLen]);
  return names;
}

}  // namespace dtrain
