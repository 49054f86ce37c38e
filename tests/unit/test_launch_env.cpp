// Launch-environment variables: srun, mpirun (also inside a Slurm allocation) and inconsistencies.
#include <catch2/catch.hpp>
#include <map>

#include "launch/launch_env.hpp"
#include "runtime/cuda_device.hpp"

using namespace dtrain;

namespace {

LaunchEnv from(const std::map<std::string, std::string>& vars, int rank, int size, std::vector<std::string>& problems) {
  return launch_env_from_variables(
      [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      rank, size, problems);
}

}  // namespace

TEST_CASE("srun task variables give local rank, node and job", "[launch]") {
  std::vector<std::string> problems;
  const auto e = from({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
                       {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "42"}, {"SLURM_STEP_NUM_NODES", "2"},
                       {"SLURM_JOB_NODELIST", "node[1-2]"}, {"SLURMD_NODENAME", "node2"}},
                      3, 4, problems);
  CHECK(problems.empty());
  CHECK(e.launcher == "srun");
  CHECK(e.local_rank == 1);
  CHECK(e.node_id == 1);
  CHECK(e.num_nodes == 2);
  CHECK(e.job_id == "42");
  CHECK(e.node_name == "node2");
  CHECK(e.job_nodes == std::vector<std::string>{"node1", "node2"});
}

TEST_CASE("srun without MPI support is reported with the fix", "[launch]") {
  std::vector<std::string> problems;
  // What a process sees when srun started 4 tasks but MPI came up as singletons.
  from({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}}, 0, 1, problems);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("SLURM_PROCID") != std::string::npos);
  CHECK(problems[0].find("--mpi=pmix") != std::string::npos);
}

TEST_CASE("mpirun inside a Slurm allocation ignores the daemon's SLURM_PROCID", "[launch]") {
  std::vector<std::string> problems;
  const auto e = from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "7"},
                       {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                      3, 4, problems);
  CHECK(problems.empty());
  CHECK(e.launcher == "mpirun");
  CHECK(e.local_rank == 1);
  CHECK(e.local_size == 2);
  CHECK(e.job_id == "7");
  CHECK(e.node_id == -1);  // completed from MPI by detect_launch_env
}

TEST_CASE("mpirun rank disagreeing with MPI is reported", "[launch]") {
  std::vector<std::string> problems;
  from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, 0, 1, problems);
  CHECK(problems.size() == 1);
}

TEST_CASE("no launcher variables leave everything to MPI", "[launch]") {
  std::vector<std::string> problems;
  const auto e = from({}, 0, 1, problems);
  CHECK(problems.empty());
  CHECK(e.launcher == "mpi");
  CHECK(e.local_rank == -1);
}

TEST_CASE("GPU device is the local rank modulo visible devices", "[launch]") {
  CHECK(device_for_local_rank(0, 4) == 0);
  CHECK(device_for_local_rank(5, 4) == 1);
  CHECK(device_for_local_rank(0, 0) == -1);
}
