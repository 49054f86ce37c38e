#!/usr/bin/env bash
# A stop signal during start-up: SIGUSR1 as soon as every rank has its handler (the first thing dtrain
# does), long before the first step. Every rank exits 3, says there was nothing to save, and no
# checkpoint is written.
#   startup_signal.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
source "$(dirname "$0")/lib.sh"
export OMPI_MCA_orte_abort_on_non_zero_status=0
make_small_data "$tool"
timeout -k 5 60 mpirun -np 2 bash -c '"$@"; echo "rank-exit $OMPI_COMM_WORLD_RANK $?"' _ "$dtrain" "$src/inputs/tiny.ini" \
  "--data.path=$work/d" --system.tensor_model_parallel_size=1 --training.train_iters=50 --training.eval_interval=0 \
  "--checkpoint.dir=$work/ck" "--logging.metrics_file=$work/m.jsonl" > "$work/out.log" 2>&1 &
runner=$!
handled() {  # handled PID: SIGUSR1 (bit 9 of SigCgt) is caught
  local mask
  mask=$(awk '/^SigCgt/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$mask" ] && (( (16#$mask >> 9) & 1 ))
}
pids=""
for _ in $(seq 1 500); do
  pids=$(pgrep -f -- "^$dtrain .*--logging.metrics_file=$work/m.jsonl" | tr '\n' ' ')
  ready=0
  for p in $pids; do handled "$p" && ready=$((ready + 1)); done
  [ "$ready" -eq 2 ] && break
  sleep 0.01
done
[ "$(wc -w <<<"$pids")" -eq 2 ] || fail "the 2 ranks did not start"
kill -USR1 $pids
wait $runner
cat "$work/out.log"
[ "$(grep -c '^rank-exit [01] 3$' "$work/out.log")" -eq 2 ] || fail "not every rank exited 3"
grep -q "received SIGUSR1 before the first step; nothing to save" "$work/out.log" || fail "no message"
[ ! -e "$work/ck/latest" ] || fail "a checkpoint was written"
[ ! -s "$work/m.jsonl" ] || fail "a step was trained"
echo PASS
