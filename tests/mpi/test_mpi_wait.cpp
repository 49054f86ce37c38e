// comm/mpi_wait: DTRAIN_MPI_WAIT's values, and the automatic choice against the node's own count of
// ranks and CPUs (more ranks than online CPUs: Open MPI yields, so waits must sleep).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "comm/mpi_wait.hpp"
#include "common/error.hpp"

namespace dtrain {

TEST_CASE("DTRAIN_MPI_WAIT: auto, poll or sleep, anything else refused by name", "[mpi_wait]") {
  CHECK(parse_wait_policy(nullptr) == WaitPolicy::automatic);
  CHECK(parse_wait_policy("auto") == WaitPolicy::automatic);
  CHECK(parse_wait_policy("poll") == WaitPolicy::poll);
  CHECK(parse_wait_policy("sleep") == WaitPolicy::sleep);
  CHECK_THROWS_MATCHES(parse_wait_policy("Sleep"), UserError,
                       Catch::Matchers::Message("DTRAIN_MPI_WAIT='Sleep' is not a way to wait; use auto (sleep where Open MPI "
                                                "yields: more ranks than cores), poll or sleep"));
}

TEST_CASE("Waits sleep where a node has more ranks than CPUs", "[mpi_wait]") {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_ranks = 0;
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const char* policy = std::getenv("DTRAIN_MPI_WAIT");
  if (policy || local_ranks <= cpus) {
    SUCCEED("not oversubscribed here, or the policy is chosen by hand: nothing to compare with");
    return;
  }
  // Every slot Open MPI counts is a CPU, so more ranks than CPUs is oversubscription it yields under.
  CHECK(mpi_waits_sleep());
  // And a collective still completes through the sleeping waits.
  MPI_Request r;
  int one = 1, sum = 0;
  MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
  mpi_wait(r);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(sum == size);
}

}  // namespace dtrain
