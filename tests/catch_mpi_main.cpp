// The one Catch2 main of every test binary: MPI (singleton or under mpirun), the binary's own set-up
// (testing::prepare_ranks: nothing, or a GPU per rank), Kokkos, Catch2, then the failure count reduced
// over all ranks so every rank exits with the same code.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include "kernels/host_runtime.hpp"
#include "support/prepare_ranks.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (const int skip = dtrain::testing::prepare_ranks()) {
    MPI_Finalize();
    return skip;
  }
  int failed = 0;
  {
    dtrain::kernels::HostRuntime host_kernels;
    Catch::Session session;
    const int rc = session.applyCommandLine(argc, argv);
    if (rc != 0) {
      MPI_Finalize();
      return rc;
    }
    const int local = session.run();
    MPI_Allreduce(&local, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return failed;
}
