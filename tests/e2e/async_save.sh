#!/usr/bin/env bash
# Asynchronous checkpoint saves (checkpoint.async_save=true) on the small model, under mpirun.
#   async_save.sh CASE DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE SOURCE_DIR
# Cases:
#   resume_pp2_dp2 | resume_zero3_dp4 | resume_bf16_tp2
#       a run saving asynchronously (each write held 0.5 s, published at a later step boundary) trains the same
#       losses as a synchronous run, its checkpoints consolidate to the same bits (weights and moments),
#       and resuming one gives the uninterrupted run's losses, bit for bit
#   kill_during_write   every rank SIGKILLed while a write is in flight (its shard half written): latest
#       still names the previous checkpoint, which --verify accepts and which resumes bit-identically
#   preempt_during_write  SIGUSR1 while a write is in flight: it is published, the stop's own checkpoint
#       too, every rank exits 3, and the resumed run matches an uninterrupted one bit for bit
#   keep_last           a save every step with keep_last=2: the two newest stay, latest names the newest,
#       and no pruned checkpoint is left behind (they are removed by the writer thread, then at the end)
#   write_failure       a background write on a full filesystem: one error on every rank (exit 2), latest
#       stays on the previous checkpoint, nothing temporary left
set -u
case_name=$1 dtrain=$2 tool=$3 consolidate=$4 src=$5
here=$(dirname "$0")
source "$here/lib.sh"
on_exit+=('pkill -KILL -f -- "^$dtrain .*--logging.metrics_file=$work/" 2>/dev/null'
          'mountpoint -q "$work/small" 2>/dev/null && umount "$work/small"')
export OMPI_MCA_orte_abort_on_non_zero_status=0  # every rank reports its own exit code
make_small_data "$tool"
base=("$src/inputs/tiny.ini" "--data.path=$work/d" --model.global_batch_size=8 --model.micro_batch_size=2
      --training.eval_interval=0 --logging.log_interval=1 --checkpoint.keep_last=100 "$no_sample" "$given_peak")

# run NAME NP ARGS...: a job whose ranks print "rank-exit R CODE"; metrics in $work/NAME.jsonl, output
# in $work/NAME.log. Returns 0 when every rank exited 0.
run() {
  local name=$1 np=$2; shift 2
  timeout -k 5 240 mpirun -np "$np" bash -c '"$@"; echo "rank-exit $OMPI_COMM_WORLD_RANK $?"' _ "$dtrain" "${base[@]}" \
    "--logging.metrics_file=$work/$name.jsonl" "$@" > "$work/$name.log" 2>&1
  [ "$(grep -ac '^rank-exit [0-9]* 0$' "$work/$name.log")" -eq "$np" ]
}
must_run() { run "$@" || { cat "$work/$1.log"; fail "$1: not every rank exited 0"; }; }
loss_of() { grep -o "{\"step\": $2, \"loss\": [0-9.e+-]*" "$work/$1.jsonl" | awk '{print $4}'; }
same_losses() {  # same_losses A B FIRST LAST: metrics A and B agree bit for bit on those steps
  local s a b
  for s in $(seq "$3" "$4"); do
    a=$(loss_of "$1" "$s"); b=$(loss_of "$2" "$s")
    echo "  step $s: $1 $a $2 $b"
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $s: $1 and $2 differ"
  done
}
steps_logged() { local n; n=$(grep -ac '"step"' "$work/$1.jsonl" 2>/dev/null); echo "${n:-0}"; }
ranks_of() { pgrep -f -- "^$dtrain .*--logging.metrics_file=$work/$1.jsonl"; }
latest_of() { cat "$1/latest" 2>/dev/null; }
# wait_for SECONDS CONDITION...: polls the condition every 0.1 s.
wait_for() {
  local limit=$(( $1 * 10 )) i; shift
  for i in $(seq 1 "$limit"); do "$@" && return 0; sleep 0.1; done
  return 1
}

resume_case() {  # resume_case NP LAYOUT...: sync vs async vs resumed, 6 steps, saves every 2
  local np=$1; shift
  local layout=("$@") t
  must_run sync "$np" "${layout[@]}" --training.train_iters=6 --checkpoint.save_interval=2 "--checkpoint.dir=$work/ckS"
  must_run async "$np" "${layout[@]}" --training.train_iters=6 --checkpoint.save_interval=2 "--checkpoint.dir=$work/ckA" \
    --checkpoint.async_save=true --debug.save_write_delay_s=0.5
  grep -av '^step' "$work/async.log"
  grep -aq 'checkpoint: saved step 2 .* in the background; training stalled' "$work/async.log" || fail "step 2 was not saved in the background"
  # The write of step 2 is published at a later step boundary (its own boundary prints the step-2 line
  # after the save was started; a save that waited for its write would publish before that line).
  awk '/^step +2\/6/ {seen = 1} /checkpoint: saved step 2 / {exit !seen}' "$work/async.log" || fail "step 2 was published at its own step boundary"
  grep -aq '"ckpt_stall_s"' "$work/async.jsonl" || fail "the metrics file does not report the stall"
  same_losses sync async 1 6
  for t in 2 4 6; do
    "$consolidate" "$work/ckS/step_0000000$t" --out "$work/S$t.h5" --optimizer > /dev/null || fail "consolidate sync step $t"
    "$consolidate" "$work/ckA/step_0000000$t" --out "$work/A$t.h5" --optimizer > /dev/null || fail "consolidate async step $t"
    h5diff --exclude-attribute / "$work/S$t.h5" "$work/A$t.h5" > "$work/diff.txt" || { head "$work/diff.txt"; fail "step $t: async checkpoint differs from sync"; }
    echo "  step $t: the asynchronous checkpoint holds the same weights and moments as the synchronous one"
  done
  "$consolidate" "$work/ckA" --verify > /dev/null || fail "--verify of the asynchronous checkpoints"
  must_run resumed "$np" "${layout[@]}" --training.train_iters=6 --checkpoint.save_interval=2 "--checkpoint.dir=$work/ckR" \
    --checkpoint.async_save=true "--checkpoint.load=$work/ckA/step_00000002"
  grep -aq "resumed from .*step_00000002 at step 2" "$work/resumed.log" || fail "no resume message"
  same_losses sync resumed 3 6
}

case $case_name in
  resume_pp2_dp2)
    resume_case 4 --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=2 --system.use_distributed_optimizer=true ;;
  resume_zero3_dp4)
    resume_case 4 --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --system.use_distributed_optimizer=true \
      --system.zero_stage=3 ;;
  resume_bf16_tp2)
    resume_case 4 --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=1 --system.use_distributed_optimizer=true \
      --system.precision=bf16 ;;
  kill_during_write)
    # Saves every 3 steps, each write held 8 s with its shard half written; training goes on meanwhile.
    one=(--system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=2 --checkpoint.save_interval=3
         "--checkpoint.dir=$work/ck" --checkpoint.async_save=true)
    run killed 2 "${one[@]}" --training.train_iters=400 --debug.save_write_delay_s=8 &
    runner=$!
    in_flight() { [ "$(latest_of "$work/ck")" = step_00000003 ] && [ "$(steps_logged killed)" -ge 7 ] &&
                  ls "$work"/ck/.tmp-step_00000006-*/shard_*.h5 > /dev/null 2>&1; }
    wait_for 150 in_flight || { cat "$work/killed.log"; fail "never saw step 6 in flight after step 3 was published"; }
    kill -KILL $(ranks_of killed)
    wait $runner
    grep -av '^step' "$work/killed.log"
    [ "$(latest_of "$work/ck")" = step_00000003 ] || fail "latest moved to $(latest_of "$work/ck")"
    [ ! -e "$work/ck/step_00000006" ] || fail "the interrupted save was published"
    ls -a "$work/ck" | grep -aq '^\.tmp-step_00000006' || fail "no trace of the interrupted save (test broken?)"
    "$consolidate" "$work/ck" --verify > /dev/null || fail "the last published checkpoint does not verify"
    last=$(steps_logged killed)
    must_run resumed 2 "${one[@]}" "--training.train_iters=$last"
    grep -av '^step' "$work/resumed.log"
    grep -aq "removed 1 unfinished save" "$work/resumed.log" || fail "the interrupted save's temporary was not cleaned"
    grep -aq "resumed from .*step_00000003 at step 3" "$work/resumed.log" || fail "did not resume from the last good checkpoint"
    same_losses killed resumed 4 "$last" ;;
  preempt_during_write)
    # Step 2's write is held 4 s; SIGUSR1 (twice) arrives while it is in flight.
    one=(--system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=2 --checkpoint.save_interval=2)
    run pre 2 "${one[@]}" --training.train_iters=400 "--checkpoint.dir=$work/ck" --checkpoint.async_save=true \
      --debug.save_write_delay_s=4 &
    runner=$!
    in_flight() { [ "$(steps_logged pre)" -ge 3 ] && [ -z "$(latest_of "$work/ck")" ] && ls -d "$work"/ck/.tmp-step_00000002-* > /dev/null 2>&1; }
    wait_for 120 in_flight || { cat "$work/pre.log"; fail "never saw step 2's write in flight"; }
    kill -USR1 $(ranks_of pre)
    sleep 0.05
    kill -USR1 $(ranks_of pre)
    wait $runner
    grep -av '^step' "$work/pre.log"
    [ "$(grep -ac '^rank-exit [01] 3$' "$work/pre.log")" -eq 2 ] || fail "not every rank exited with code 3"
    grep -aq 'checkpoint: saved step 2 .* in the background' "$work/pre.log" || fail "the write in flight was not published"
    stopped=$(sed -n 's/^step_0*\([0-9]*\)$/\1/p' "$work/ck/latest")
    grep -aq "received SIGUSR1 - saved step $stopped;" "$work/pre.log" || fail "no stop message for step $stopped"
    [ "$stopped" -gt 2 ] || fail "latest is step $stopped"
    for s in $(seq 2 2 $((stopped - 1))); do  # every save started before the stop was published
      [ -d "$work/ck/$(printf 'step_%08d' "$s")" ] || fail "the save of step $s was not published: $(ls "$work/ck")"
    done
    ls -a "$work/ck" | grep -aq '^\.tmp' && fail "a temporary was left behind: $(ls -a "$work/ck")"
    "$consolidate" "$work/ck" --verify > /dev/null || fail "the published checkpoints do not verify"
    end=$((stopped + 3))
    must_run resumed 2 "${one[@]}" "--training.train_iters=$end" "--checkpoint.dir=$work/ck" --checkpoint.async_save=true
    grep -aq "resumed from .*step_0*$stopped at step $stopped" "$work/resumed.log" || fail "did not resume from the stop's checkpoint"
    must_run ref 2 "${one[@]}" "--training.train_iters=$end" "--checkpoint.dir=$work/ckref"  # synchronous, uninterrupted
    same_losses ref resumed $((stopped + 1)) "$end" ;;
  keep_last)
    must_run kl 2 --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --training.train_iters=8 \
      --checkpoint.save_interval=1 --checkpoint.keep_last=2 "--checkpoint.dir=$work/ck" --checkpoint.async_save=true
    [ "$(grep -ac 'checkpoint: saved step .* in the background' "$work/kl.log")" -eq 7 ] || fail "not 7 background saves"
    [ "$(ls -a "$work/ck" | grep -v '^\.*$' | tr '\n' ' ')" = "latest model-final.h5 step_00000007 step_00000008 " ] ||
      fail "left in the directory: $(ls -a "$work/ck" | tr '\n' ' ')"
    [ "$(latest_of "$work/ck")" = step_00000008 ] || fail "latest is $(latest_of "$work/ck")"
    "$consolidate" "$work/ck" --verify > /dev/null || fail "--verify" ;;
  write_failure)
    # Room for the step-2 checkpoint (about 10 MB), not for step 4's as well; step 4 is written in the
    # background (the last step, 6, would wait for its own write).
    mkdir -p "$work/small"
    mount -t tmpfs -o size=14m tmpfs "$work/small" 2>/dev/null || { echo "SKIP: cannot mount a small tmpfs here"; exit 77; }
    run full 2 --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --training.train_iters=6 \
      --checkpoint.save_interval=2 --checkpoint.keep_last=4 "--checkpoint.dir=$work/small/ck" --checkpoint.async_save=true
    grep -av '^step' "$work/full.log"
    [ "$(grep -ac '^rank-exit [01] 2$' "$work/full.log")" -eq 2 ] || fail "not every rank exited 2 (a crash?)"
    [ "$(grep -ac 'dtrain: error: .*checkpoint save of step 4 failed; the previous checkpoint is untouched' "$work/full.log")" -eq 1 ] ||
      fail "no single clear error for the full disk"
    grep -aq "HDF5-DIAG" "$work/full.log" && fail "HDF5's own error stack was printed"
    [ "$(latest_of "$work/small/ck")" = step_00000002 ] || fail "latest is not the step-2 checkpoint"
    ls -a "$work/small/ck" | grep -aq '^\.tmp' && fail "the failed save left its temporary behind"
    "$consolidate" "$work/small/ck" --verify > /dev/null || fail "the last checkpoint does not verify" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo PASS
