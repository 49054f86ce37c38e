#!/usr/bin/env bash
# Shared launcher of the end-to-end tests: runs "mpirun -np NP CMD..." as root-safe and oversubscribed,
# with a hard timeout. Each rank's exit code is printed as "rank-exit R CODE" so a test can check every rank.
#   run_mpi.sh TIMEOUT_S NP CMD...
set -u
timeout_s=$1 np=$2; shift 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Let every rank finish on its own, so a test can check each rank's exit code.
export OMPI_MCA_orte_abort_on_non_zero_status=0
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
exec timeout -k 5 "$timeout_s" mpirun -np "$np" bash -c '"$@"; rc=$?; echo "rank-exit ${OMPI_COMM_WORLD_RANK} $rc"; exit $rc' rank "$@"
