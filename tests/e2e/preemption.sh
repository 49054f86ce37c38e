#!/usr/bin/env bash
# Preemption under mpirun: SIGNAL (USR1 or TERM) delivered to the rank processes mid-run, as Slurm's
# `scancel --signal` does. Every rank must stop at the same step, publish a checkpoint and exit with
# code 3; a second signal during the stop changes nothing; the resumed run's losses are bit-identical
# to an uninterrupted run's.
#   preemption.sh SIGNAL DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
sig=$1 dtrain=$2 tool=$3 src=$4
source "$(dirname "$0")/lib.sh"
on_exit+=('pkill -KILL -f -- "^$dtrain .*--logging.metrics_file=$work/" 2>/dev/null')
export OMPI_MCA_orte_abort_on_non_zero_status=0  # let every rank report its own exit code
make_small_data "$tool"
args=("$src/inputs/tiny.ini" "--data.path=$work/d" "$no_sample" "$given_peak" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1
      --model.global_batch_size=8 --model.micro_batch_size=2 --training.train_iters=400 --training.eval_interval=0
      --logging.log_interval=1)
steps_logged() { local n; n=$(grep -c '"step"' "$work/$1.jsonl" 2>/dev/null); echo "${n:-0}"; }
signal_ranks() { pkill "-$1" -f -- "^$dtrain .*--logging.metrics_file=$work/$2.jsonl"; }  # the dtrain processes only
run() {  # run NAME ARGS...: every rank's exit code is printed as "rank-exit R CODE"
  local name=$1; shift
  timeout -k 5 180 mpirun -np 2 bash -c '"$@"; echo "rank-exit $OMPI_COMM_WORLD_RANK $?"' _ "$dtrain" "${args[@]}" \
    "--logging.metrics_file=$work/$name.jsonl" "$@" > "$work/$name.log" 2>&1
}
# The interrupted run: signal both ranks once a few steps are done, and once more right after.
run pre "--checkpoint.dir=$work/ck" &
runner=$!
for i in $(seq 1 200); do
  [ "$(steps_logged pre)" -ge 5 ] && break
  sleep 0.1
done
signal_ranks "$sig" pre
sleep 0.05
signal_ranks "$sig" pre
wait $runner
cat "$work/pre.log" | grep -av '^step'
[ "$(grep -c '^rank-exit [01] 3$' "$work/pre.log")" -eq 2 ] || fail "not every rank exited with code 3"
grep -q "received SIG$sig - saved step" "$work/pre.log" || fail "no stop message"
stopped=$(sed -n 's/^step_0*\([0-9]*\)$/\1/p' "$work/ck/latest")
[ -n "$stopped" ] && [ "$stopped" -lt 400 ] || fail "no checkpoint published before the end (latest: $(cat "$work/ck/latest" 2>/dev/null))"
echo "stopped at step $stopped"
# Resume (load=auto), and an uninterrupted reference run; both end at step stopped+6.
end=$((stopped + 6))
run resumed "--checkpoint.dir=$work/ck" --training.train_iters=400 --logging.log_interval=1 --training.eval_interval=0 &
resumer=$!
for i in $(seq 1 300); do
  [ "$(steps_logged resumed)" -ge 6 ] && break
  sleep 0.1
done
signal_ranks USR1 resumed
wait $resumer
grep -q "resumed from .*step_0*$stopped at step $stopped" "$work/resumed.log" || fail "did not resume from the preemption checkpoint"
run ref "--checkpoint.dir=$work/ck_ref" --training.train_iters=400 &
refr=$!
for i in $(seq 1 600); do
  [ "$(steps_logged ref)" -ge "$end" ] && break
  sleep 0.1
done
signal_ranks USR1 ref
wait $refr
for s in $(seq $((stopped + 1)) "$end"); do
  a=$(grep -o "{\"step\": $s, \"loss\": [0-9.e+-]*" "$work/ref.jsonl" | awk '{print $4}')
  b=$(grep -o "{\"step\": $s, \"loss\": [0-9.e+-]*" "$work/resumed.jsonl" | awk '{print $4}')
  echo "  step $s: uninterrupted $a resumed $b"
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $s differs"
done
echo PASS
