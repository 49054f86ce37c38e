#!/usr/bin/env bash
# logging.tensorboard_dir: the event file of a 100-step run (2 ranks, validation every 25 steps) decodes,
# by a reader that shares no code with dtrain (tensorboard_read.py: crcmod's CRC-32C, Google's protobuf
# runtime, the .proto from TensorFlow's public description), to the metrics file's values; an event
# directory that cannot be created is one warning, and training goes on.
#   tensorboard.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
args=("$src/inputs/tiny.ini" "--data.path=$work/d" --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=1
      --model.global_batch_size=4 --model.micro_batch_size=2 --training.train_iters=100 --training.eval_interval=25
      --checkpoint.dir= --logging.log_interval=1 --logging.sample_tokens=0)
"$here/run_mpi.sh" 120 2 "$dtrain" "${args[@]}" "--logging.metrics_file=$work/m.jsonl" "--logging.tensorboard_dir=$work/tb" > "$work/out.log" 2>&1
grep -v '^step\|^sample' "$work/out.log"
[ "$(grep -c '^rank-exit [0-9]* 0$' "$work/out.log")" -eq 2 ] || fail "the run failed"
[ "$(ls "$work/tb" | wc -l)" -eq 1 ] || fail "expected one event file in $work/tb: $(ls "$work/tb")"
grep -q "TensorBoard: events go to $work/tb/events.out.tfevents." "$work/out.log" || fail "the event file is not named in the log"
/usr/bin/python3 "$here/tensorboard_read.py" "$work/tb"/events.out.tfevents.* "$work/m.jsonl" || fail "the event file does not hold the metrics"
grep -c '"val_loss"' "$work/m.jsonl" | grep -qx 4 || fail "expected 4 validations in the metrics"
# A path under a regular file cannot be a directory: a warning, and the run still trains.
touch "$work/file"
"$here/run_mpi.sh" 60 2 "$dtrain" "${args[@]}" --training.train_iters=2 "--logging.tensorboard_dir=$work/file/tb" > "$work/bad.log" 2>&1
[ "$(grep -c '^rank-exit [0-9]* 0$' "$work/bad.log")" -eq 2 ] || { cat "$work/bad.log"; fail "an unusable event directory stopped the run"; }
grep -q "warning: cannot create the TensorBoard event file '$work/file/tb/.*; no TensorBoard events will be written" "$work/bad.log" ||
  { cat "$work/bad.log"; fail "no warning for the unusable directory"; }
echo PASS
