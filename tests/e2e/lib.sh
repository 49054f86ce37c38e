# Shared by the end-to-end test scripts (sourced, not run): a scratch directory $work removed at exit
# (scripts add their own cleanup commands to on_exit), fail(), the Open MPI settings for running as
# root with more ranks than cores, and make_small_data, a byte-level data set from a short text.
work=$(mktemp -d)
chmod 755 "$work"  # world-searchable: munged (local Slurm) puts its socket below it
on_exit=()
e2e_cleanup() {
  local c
  for c in "${on_exit[@]}"; do eval "$c"; done
  rm -rf "$work"
}
trap e2e_cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

# make_small_data DTRAIN_DATA [LINES]: $work/d.train.bin and $work/d.val.bin
make_small_data() {
  local i
  for i in $(seq 1 "${2:-60}"); do printf 'Call me Ishmael. Some years ago, never mind how long precisely, having little money.\n'; done > "$work/text.txt"
  "$1" --out "$work/d" "$work/text.txt" > /dev/null || fail "dtrain-data"
}
