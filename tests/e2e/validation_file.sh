#!/usr/bin/env bash
# The validation file is needed only when validation runs: without PREFIX.val.bin, a run with
# training.eval_interval=0 trains; with validation on, it is one error naming the file.
#   validation_file.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
rm "$work/d.val.bin"
args=("$src/inputs/tiny.ini" "--data.path=$work/d" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1
      --training.train_iters=2 --checkpoint.dir= --logging.log_interval=1 "$no_sample" "$given_peak")
"$here/run_mpi.sh" 60 2 "$dtrain" "${args[@]}" --training.eval_interval=0 > "$work/out.log" 2>&1
grep -v '^sample' "$work/out.log"
[ "$(grep -c '^rank-exit [0-9]* 0$' "$work/out.log")" -eq 2 ] || fail "training without validation needed the validation file"
grep -q '^step 2/2' "$work/out.log" || fail "did not train"
"$here/expect_error.sh" 2 "d.val.bin" "$dtrain" "${args[@]}" --training.eval_interval=1 || fail "validation on without the file"
