// end_job, fatal() and the MPI checked-call reporter: one message naming rank, call, place and cause,
// then the whole job ends.
#include "common/error.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dtrain {
namespace {

int world_rank_or_minus_one() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

}  // namespace

void end_job(int code, const std::string& line) {
  const int rank = world_rank_or_minus_one();
  if (rank >= 0)
    std::fprintf(stderr, "dtrain: rank %d: %s\n", rank, line.c_str());
  else
    std::fprintf(stderr, "dtrain: %s\n", line.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  if (rank >= 0) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void fatal(const std::string& message) { end_job(kFatalExit, "error: " + message); }

void check_mpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fatal(std::string("MPI call failed at ") + file + ":" + std::to_string(line) + ": " + call + ": " + text);
}

}  // namespace dtrain
