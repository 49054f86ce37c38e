#!/usr/bin/env bash
# Raw MPI lives in src/comm (the communication layer; HostComm and host_values for small host-side
# agreements) and in the start-up and fatal-error code only: a raw call anywhere else, or MPI's
# communicator type in a header outside src/comm, fails this test, named with its file and line.
# Comment lines do not count.
#   raw_mpi_calls.sh SOURCE_DIR
# Allowed outside src/comm:
#   src/app/entry.cpp                 MPI's start and end, the world communicator's birth
#   src/launch/launch_env.cpp         what the launcher and the node say; the node communicator's split
#   src/launch/compute_budget.cpp     start-up measurements of the node's cores and GPUs, over the node
#   src/launch/placement.cpp          the placement of GPUs
#   src/common/error.cpp              the fatal tier: ends the whole job with no communicator, also when
#   src/runtime/watchdog.cpp          a collective hangs
#   tools/*.cpp                       MPI_Init and MPI_Finalize only (a tool's start and end)
set -u
src=$1
cd "$src" || exit 2
allowed='^src/(app/entry|launch/launch_env|launch/compute_budget|launch/placement|common/error|runtime/watchdog)\.cpp:'
comment='^[^:]+:[0-9]+:\s*//'
found=$(grep -rnE '\bMPI_[A-Z][a-z_]*\(' src tools --include=*.cpp --include=*.hpp --include=*.cu --include=*.cuh |
  grep -v '^src/comm/' | grep -vE "$allowed" | grep -vE "$comment" |
  grep -vE '^tools/[^:]+:[0-9]+:.*\bMPI_(Init|Finalize)\(' || true)
typed=$(grep -rnE '\bMPI_Comm\b' src tools --include=*.hpp --include=*.cuh | grep -v '^src/comm/' | grep -vE "$comment" || true)
status=0
if [ -n "$found" ]; then
  echo "FAIL: raw MPI calls outside src/comm (use comm/host_values.hpp or a Communicator):"
  echo "$found"
  status=1
fi
if [ -n "$typed" ]; then
  echo "FAIL: MPI_Comm in a header outside src/comm (pass a HostComm, comm/host_comm.hpp):"
  echo "$typed"
  status=1
fi
[ $status = 0 ] && echo "PASS: no raw MPI call outside src/comm and the start-up and fatal-error files; no MPI_Comm in a header outside src/comm"
exit $status
