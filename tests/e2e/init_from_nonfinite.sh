#!/usr/bin/env bash
# checkpoint.init_from a weights file that holds a NaN: refused at load on every rank (exit 2), in one
# line naming the file and the tensor, before any step is trained and without writing a checkpoint.
# The NaN is written by h5py (an independent writer) into model-final.h5 of a 2-step run.
#   init_from_nonfinite.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
small=(--system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --model.num_layers=2 --model.hidden_size=32
       --model.seq_length=16 --model.global_batch_size=4 --model.micro_batch_size=2 --training.eval_interval=0 "$no_sample" "$given_peak")
timeout 120 mpirun -np 1 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" "${small[@]}" --training.train_iters=2 \
  "--checkpoint.dir=$work/ck" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "the 2-step run"; }
/usr/bin/python3 - "$work/ck/model-final.h5" "$work/nan.h5" <<'PY' || fail "h5py could not write the NaN"
import shutil, sys, h5py, numpy as np
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    d = f["h1.fcproj_w"]
    v = d[()]
    v.flat[v.size // 2] = np.nan
    d[...] = v
PY
out=$("$here/run_mpi.sh" 60 2 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" "${small[@]}" --training.train_iters=3 \
      "--checkpoint.dir=$work/ck2" "--checkpoint.init_from=$work/nan.h5" "--logging.metrics_file=$work/m.jsonl" 2>&1)
echo "$out"
[ "$(grep -c '^rank-exit [0-9]* 2$' <<<"$out")" -eq 2 ] || fail "not every rank exited 2"
[ "$(grep -c "^dtrain: error: .*'$work/nan.h5'.*h1.fcproj_w.*non-finite" <<<"$out")" -eq 1 ] \
  || fail "no single error naming the file and the tensor"
[ ! -s "$work/m.jsonl" ] || fail "a step was trained"
[ ! -e "$work/ck2/latest" ] || fail "a checkpoint was written"
echo PASS
