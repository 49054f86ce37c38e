#!/usr/bin/env bash
# checkpoint.keep_best and training.early_stop_patience on a run that overfits: it trains on one sentence
# and validates on another, so the validation loss falls to a lowest value at step 10 (3.387 here) and
# then rises (3.429, 3.454, 3.443 at steps 12-16, each more than 0.3% above it: no machine's rounding
# reorders them). With patience 3 the run ends after step 16, exit 0, naming step 10; the directory keeps
# the newest checkpoint (keep_last=1) and the two lowest validations (keep_best=2: steps 10 and 12), each
# manifest with its val_loss (kept by a reshard); model-final.h5 holds step 10's weights (equal to its consolidation). The
# checkpoints carry the record: resumed at step 12 into another directory, the run stops after step 16
# again with step 10's weights, found where it resumed; resumed where step 10 is gone, it refuses at
# start. A fresh run beside another run's checkpoint of a lower loss keeps and loads its own best.
#   early_stop.sh DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE SOURCE_DIR
set -u
dtrain=$1 tool=$2 consolidate=$3 src=$4
here=$(dirname "$0")
source "$here/lib.sh"
for i in $(seq 60); do echo "Call me Ishmael. Some years ago, never mind how long precisely, having little money."; done > "$work/a.txt"
for i in $(seq 60); do echo "It is a way I have of driving off the spleen and regulating the circulation."; done > "$work/b.txt"
"$tool" --out "$work/train" "$work/a.txt" > /dev/null && "$tool" --out "$work/other" "$work/b.txt" > /dev/null || fail "dtrain-data"
cp "$work/other.val.bin" "$work/train.val.bin"
out=$("$here/run_mpi.sh" 120 1 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/train" --system.tensor_model_parallel_size=1 \
      --system.pipeline_model_parallel_size=1 --training.train_iters=40 --training.eval_interval=2 --training.eval_iters=1 \
      --logging.log_interval=2 --logging.sample_tokens=0 "--checkpoint.dir=$work/ck" --checkpoint.keep_last=1 \
      --checkpoint.keep_best=2 --training.early_stop_patience=3 --optimizer.warmup_iters=2 --optimizer.lr=3e-3 2>&1)
echo "$out" | grep -E "val loss|early|loaded"
grep -q '^rank-exit 0 0$' <<<"$out" || fail "the run did not finish with exit 0"
grep -q "early stop after step 16: 3 validation(s) without a lower loss than .* at step 10" <<<"$out" || fail "no early stop at step 16 naming step 10"
[ "$(ls "$work/ck" | grep '^step_' | tr '\n' ' ')" = "step_00000010 step_00000012 step_00000016 " ] ||
  fail "kept $(ls "$work/ck" | tr '\n' ' '), expected steps 10, 12 (best) and 16 (last)"
for s in 10 12 16; do grep -q '^val_loss [0-9.]*$' "$work/ck/step_000000$s/manifest.txt" || fail "step $s's manifest has no val_loss"; done
# A reshard keeps it (it was dropped, so keep_best could not rank the resharded checkpoint).
"$consolidate" "$work/ck/step_00000010" --reshard tp=2,pp=1,dp=1 --out "$work/rs" > /dev/null || fail "reshard step 10"
[ "$(grep '^val_loss' "$work/rs/step_00000010/manifest.txt")" = "$(grep '^val_loss' "$work/ck/step_00000010/manifest.txt")" ] ||
  fail "the resharded checkpoint's manifest lost step 10's val_loss"
"$consolidate" "$work/ck/step_00000010" --out "$work/best.h5" > /dev/null || fail "consolidate step 10"
h5diff --exclude-attribute / "$work/best.h5" "$work/ck/model-final.h5" > "$work/diff.txt" ||
  { head "$work/diff.txt"; fail "model-final.h5 is not step 10's weights"; }
echo "model-final.h5 holds the best validation's weights (step 10)"
# The record travels in checkpoints: step 12's says best step 10 and one stale validation; resumed there,
# the run stops after step 16 again, naming step 10 (a fresh record would start from step 14's loss).
/usr/bin/python3 - "$work/ck/step_00000012/shard_00000.h5" <<'PY' || fail "step 12's checkpoint does not hold the validation record"
import sys, h5py
a = h5py.File(sys.argv[1], "r").attrs
assert a["best_val_step"] == 10 and a["stale_validations"] == 1 and abs(a["best_val_loss"] - 3.387) < 0.01, dict(a)
PY
# Resumed into another checkpoint.dir (ck2), early stopping loads step 10 from where it was resumed
# (it looked for ck2/step_00000010 and failed after the whole run).
run() { "$here/run_mpi.sh" 120 1 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/train" --system.tensor_model_parallel_size=1 \
      --system.pipeline_model_parallel_size=1 --training.train_iters=40 --training.eval_interval=2 --training.eval_iters=1 \
      --logging.log_interval=2 --logging.sample_tokens=0 --checkpoint.keep_last=1 --training.early_stop_patience=3 \
      --optimizer.warmup_iters=2 --optimizer.lr=3e-3 "$@" 2>&1; }
out=$(run "--checkpoint.dir=$work/ck2" --checkpoint.keep_best=2 "--checkpoint.load=$work/ck/step_00000012")
grep -q '^rank-exit 0 0$' <<<"$out" && grep -q "early stop after step 16: 3 validation(s) without a lower loss than .* at step 10" <<<"$out" ||
  { echo "$out" | grep -E "val loss|early|resumed|error"; fail "resumed at step 12 into another directory, the run did not stop after step 16 with step 10's weights"; }
h5diff --exclude-attribute / "$work/best.h5" "$work/ck2/model-final.h5" > "$work/diff.txt" ||
  { head "$work/diff.txt"; fail "ck2/model-final.h5 is not step 10's weights"; }
echo "resumed at step 12 into another directory: early stop after step 16 again, with step 10's weights from where it resumed"
# Resumed where step 10 is gone, the run refuses before training, naming the step.
rm -rf "$work/ck2/step_00000010"
out=$(run "--checkpoint.dir=$work/ck2" --checkpoint.keep_best=2 "--checkpoint.load=$work/ck2/step_00000016")
grep -q '^rank-exit 0 2$' <<<"$out" && grep -q "holds this run's checkpoint of step 10" <<<"$out" && ! grep -q '^step ' <<<"$out" ||
  { echo "$out" | tail -5; fail "resumed without the best validation's checkpoint, the run did not refuse at start"; }
echo "resumed without the best checkpoint: refused before training"
# A fresh run in a directory where an older run's checkpoint (no run line) has a lower validation loss (0.5): keep_best=1
# keeps this run's best (step 10), not the other's in its place, and early stopping loads it.
mkdir -p "$work/ck3" && cp -r "$work/ck/step_00000016" "$work/ck3/step_00000003" &&
  sed -i -e 's/^step .*/step 3/' -e 's/^sequence .*/sequence 1/' -e 's/^val_loss .*/val_loss 0.5/' \
      -e '/^run /d' "$work/ck3/step_00000003/manifest.txt" || fail "planting another run's checkpoint"
out=$(run "--checkpoint.dir=$work/ck3" --checkpoint.keep_best=1)
grep -q '^rank-exit 0 0$' <<<"$out" && grep -q "early stop after step 16: 3 validation(s) without a lower loss than .* at step 10" <<<"$out" ||
  { echo "$out" | grep -E "val loss|early|error"; fail "beside another run's better checkpoint, early stopping did not end with step 10's weights"; }
h5diff --exclude-attribute / "$work/best.h5" "$work/ck3/model-final.h5" > "$work/diff.txt" ||
  { head "$work/diff.txt"; fail "ck3/model-final.h5 is not step 10's weights"; }
echo "beside another run's lower validation loss: this run's best kept and loaded"
echo PASS
