#!/usr/bin/env bash
# Raw MPI calls live in src/comm (the communication layer, host_values for small host-side agreements)
# and in the start-up and fatal-error code only: a call anywhere else fails this test, named with its
# file and line. Comment lines do not count.
#   raw_mpi_calls.sh SOURCE_DIR
# Allowed outside src/comm:
#   src/app/entry.cpp                 MPI's start and end, the world communicator's birth
#   src/runtime/launch_env.cpp        what the launcher and the node say, before any communicator exists
#   src/runtime/compute_budget.cpp    start-up measurements of the node's cores and GPUs, over the node
#   src/runtime/placement.cpp         communicator launch_env splits once; the placement of GPUs
#   src/common/error.cpp              the fatal tier: ends the whole job with no communicator, also when
#   src/runtime/watchdog.cpp          a collective hangs
#   tools/*.cpp                       MPI_Init and MPI_Finalize only (a tool's start and end)
set -u
src=$1
cd "$src" || exit 2
allowed='^src/(app/entry|runtime/launch_env|runtime/compute_budget|runtime/placement|common/error|runtime/watchdog)\.cpp:'
found=$(grep -rnE '\bMPI_[A-Z][a-z_]*\(' src tools --include=*.cpp --include=*.hpp --include=*.cu --include=*.cuh |
  grep -v '^src/comm/' | grep -vE "$allowed" | grep -vE '^[^:]+:[0-9]+:\s*//' |
  grep -vE '^tools/[^:]+:[0-9]+:.*\bMPI_(Init|Finalize)\(' || true)
if [ -n "$found" ]; then
  echo "FAIL: raw MPI calls outside src/comm (use comm/host_values.hpp or a Communicator):"
  echo "$found"
  exit 1
fi
echo "PASS: no raw MPI call outside src/comm and the start-up and fatal-error files"
