#!/usr/bin/env bash
# Every program's --help is its own (no library's help before it) and exits 0; dtrain's names the GPU
# diagnostics' environment variables; the benchmark's documented usage (--threads 1) runs.
#   help.sh DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE TRAIN_THROUGHPUT
set -u
dtrain=$1 data=$2 consolidate=$3 bench=$4
source "$(dirname "$0")/lib.sh"
check_help() {  # check_help FIRST_LINE_PREFIX MUST_CONTAIN CMD...
  local prefix=$1 contains=$2; shift 2
  "$@" > "$work/help.txt" 2>&1 || { cat "$work/help.txt"; fail "'$*' exited $?"; }
  head -n 1 "$work/help.txt" | grep -q "^$prefix" || { head -n 3 "$work/help.txt"; fail "'$*' does not start with '$prefix'"; }
  grep -qi kokkos "$work/help.txt" && fail "'$*' prints Kokkos' help"
  grep -q -- "$contains" "$work/help.txt" || fail "'$*' does not mention '$contains'"
  echo "  $*: ok ($(wc -l < "$work/help.txt") lines)"
}
check_help "dtrain " "system.tensor_model_parallel_size" "$dtrain" --help
check_help "dtrain " "DTRAIN_SYNC_LAUNCH=1" "$dtrain" --help
check_help "dtrain " "DTRAIN_KERNEL_PROFILE=FILE" "$dtrain" --help
check_help "dtrain " "--weights" "$dtrain" generate --help
check_help "dtrain " "--layout" "$dtrain" plan --help
check_help "dtrain " "--quick" "$dtrain" calibrate --help
check_help "usage: ckpt-consolidate" "--reshard" "$consolidate" --help
check_help "Usage: dtrain-data" "--val-fraction" "$data" --help
check_help "usage: train_throughput" "--threads" "$bench" --help
(cd "$work" && "$bench" --threads 1 --steps 1 --repeats 1 --only L6-d384-V256 --json "$work/t.json") > "$work/bench.txt" 2>&1 ||
  { cat "$work/bench.txt"; fail "train_throughput --threads 1 failed"; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['configs'][0]['tokens_per_s'] > 0" "$work/t.json" ||
  fail "train_throughput wrote no JSON"
echo PASS
