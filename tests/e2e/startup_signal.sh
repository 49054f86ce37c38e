#!/usr/bin/env bash
# A stop signal during start-up, long before the first step: every rank exits 3, says there was
# nothing to save, and no checkpoint is written.
#   startup_signal.sh DTRAIN DTRAIN_DATA SOURCE_DIR [WHEN [SIGNAL [SLOW_START_LIBRARY]]]
#   WHEN: handled   (default) as soon as every rank has its handler installed
#         at_launch the moment each rank blocks the signal (the dtrain launcher's first instruction),
#                   while it still loads its libraries, long before the handler is installed (the
#                   ranks preload SLOW_START_LIBRARY, whose 0.3 s constructor stands for a cold node's
#                   library loading: on a warm machine the window is a few ms)
#         slow_load as soon as every rank has its handler installed, while a start-up phase takes 30 s (the
#                   ranks preload SLOW_START_LIBRARY = slow_open.c, whose open of the token file waits):
#                   the job must end within 15 s with code 3 (mpirun's: StartupStop's 5 s), not after the phase
#   SIGNAL: USR1 (default) or TERM
set -u
dtrain=$1 tool=$2 src=$3 when=${4:-handled} sig=${5:-USR1} slow=${6:-}
source "$(dirname "$0")/lib.sh"
export OMPI_MCA_orte_abort_on_non_zero_status=0
make_small_data "$tool"
[ "$when" = slow_load ] && export SLOW_OPEN=d.train.bin
timeout -k 5 60 mpirun -np 2 ${slow:+-x LD_PRELOAD="$slow"} ${SLOW_OPEN:+-x SLOW_OPEN} bash -c '"$@"; echo "rank-exit $OMPI_COMM_WORLD_RANK $?"' _ "$dtrain" "$src/inputs/tiny.ini" \
  "--data.path=$work/d" --system.tensor_model_parallel_size=1 --training.train_iters=50 --training.eval_interval=0 \
  "--checkpoint.dir=$work/ck" "--logging.metrics_file=$work/m.jsonl" > "$work/out.log" 2>&1 &
runner=$!
signo=$(kill -l "$sig")
blocked() {  # blocked PID: the signal is in the process's blocked mask (bit signo-1 of SigBlk)
  local mask
  mask=$(awk '/^SigBlk/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$mask" ] && (( (16#$mask >> (signo - 1)) & 1 ))
}
handled() {  # handled PID: SIGUSR1 (bit 9 of SigCgt) is caught
  local mask
  mask=$(awk '/^SigCgt/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$mask" ] && (( (16#$mask >> 9) & 1 ))
}
pids=""
signalled=""
for _ in $(seq 1 2000); do
  pids=$(pgrep -f -- "^$dtrain .*--logging.metrics_file=$work/m.jsonl" | tr '\n' ' ')
  if [ "$when" = at_launch ]; then
    for p in $pids; do  # each rank the moment it exists
      [[ " $signalled " == *" $p "* ]] && continue
      blocked "$p" && kill -"$sig" "$p" 2> /dev/null && signalled+=" $p"
    done
    [ "$(wc -w <<<"$signalled")" -eq 2 ] && break
    sleep 0.001
    continue
  fi
  ready=0
  for p in $pids; do handled "$p" && ready=$((ready + 1)); done
  [ "$ready" -eq 2 ] && break
  sleep 0.01
done
[ "$(wc -w <<<"$pids")" -eq 2 ] || fail "the 2 ranks did not start"
[ "$when" != at_launch ] || [ "$(wc -w <<<"$signalled")" -eq 2 ] ||
  { kill -"$sig" $pids; wait $runner; fail "a rank never had SIG$sig blocked at start (the dtrain launcher blocks it first)"; }
[ "$when" = at_launch ] || kill -"$sig" $pids
signalled_at=$(date +%s.%N)
wait $runner
runner_rc=$?
cat "$work/out.log"
if [ "$when" = slow_load ]; then
  took=$(echo "$(date +%s.%N) - $signalled_at" | bc)
  echo "the job ended $took s after the signal, with code $runner_rc"
  [ "$runner_rc" -eq 3 ] || fail "mpirun exited $runner_rc, not 3"
  [ "$(echo "$took < 15 * ${DTRAIN_TEST_TIME_SCALE:-1}" | bc)" -eq 1 ] || fail "the job went on with its start-up for $took s after the signal"
  grep -q "received SIG$sig during start-up, before any step: nothing to save" "$work/out.log" || fail "no message"
  [ ! -e "$work/ck/latest" ] || fail "a checkpoint was written"
  echo PASS
  exit 0
fi
if [ "${DTRAIN_TEST_TIME_SCALE:-1}" -gt 1 ] && [ "$runner_rc" -eq 3 ] && grep -q "received SIG$sig during start-up, before any step" "$work/out.log"; then
  # A sanitized build starts up several times slower: the rest of its start-up outlasted StartupStop's
  # second, which ended the job with 3 before the ranks' own agreement (the slow_load case's path).
  echo "the start-up stop ended the job (a sanitized build's slow start-up)"
else
  [ "$(grep -c '^rank-exit [01] 3$' "$work/out.log")" -eq 2 ] || fail "not every rank exited 3"
  grep -q "received SIG$sig before the first step; nothing to save" "$work/out.log" || fail "no message"
fi
[ ! -e "$work/ck/latest" ] || fail "a checkpoint was written"
[ ! -s "$work/m.jsonl" ] || fail "a step was trained"
echo PASS
