#!/usr/bin/env bash
# A run that diverges (lr=1000, no clipping, a checkpoint every step) stops with one error on every
# rank naming the step (exit 5, a non-finite step) or the non-finite tensor a save refused (exit 2); no checkpoint with a NaN or infinity is ever
# published (the last one verifies and h5py finds every value finite) and no model-final.h5 is written.
#   nonfinite.sh DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE SOURCE_DIR [DTRAIN_ARGS...]
set -u
dtrain=$1 tool=$2 consolidate=$3 src=$4
shift 4
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
out=$("$here/run_mpi.sh" 60 2 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --system.tensor_model_parallel_size=1 \
      --optimizer.lr=1000 --optimizer.clip_grad=0 --optimizer.warmup_iters=0 --optimizer.min_lr=0 --training.train_iters=30 \
      "--checkpoint.dir=$work/ck" --checkpoint.save_interval=1 --checkpoint.keep_last=30 --training.eval_interval=0 \
      --logging.log_interval=1 "$@" 2>&1)
echo "$out" | grep -v '^step'
if grep -qE '^dtrain: error: step [0-9]+: the loss is' <<<"$out"; then code=5; else code=2; fi
[ "$(grep -c "^rank-exit [0-9]* $code\$" <<<"$out")" -eq 2 ] || fail "not every rank exited $code"
[ "$(grep -cE '^dtrain: error: .*(step [0-9]+: the loss is|holds non-finite values)' <<<"$out")" -eq 1 ] || fail "no single error naming the step or tensor"
[ ! -e "$work/ck/model-final.h5" ] || fail "final weights written after a divergence"
latest=$(cat "$work/ck/latest")
"$consolidate" "$work/ck" --out "$work/last.h5" --optimizer > /dev/null || fail "the last published checkpoint ($latest) does not load"
/usr/bin/python3 - "$work/last.h5" <<'PY' || fail "the last published checkpoint holds non-finite values"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
def check(name, obj):
    if isinstance(obj, h5py.Dataset):
        assert np.isfinite(obj[()]).all(), name
f.visititems(check)
print("every value of the last published checkpoint is finite")
PY
echo PASS
