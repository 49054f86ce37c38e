#!/usr/bin/env bash
# inputs/tiny.ini as shipped (tp=2, pp=2) on 4 ranks, a few steps on a small text: every rank exits 0,
# the step line shows the measured and the predicted pipeline bubble, the loss falls, and the run
# writes its final weights and prints a sample; tools/dtrain-plot draws its metrics.
#   tiny_pipeline_run.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
out=$("$here/run_mpi.sh" 120 4 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --training.train_iters=8 \
      --logging.log_interval=4 --training.eval_interval=8 --training.eval_iters=1 --model.global_batch_size=8 \
      --model.micro_batch_size=1 "--checkpoint.dir=$work/ckpt" "--logging.metrics_file=$work/metrics.jsonl" 2>&1)
echo "$out"
[ "$(grep -c '^rank-exit [0-9]* 0$' <<<"$out")" -eq 4 ] || fail "not every rank exited 0"
grep -aEq '^step 8/8 .*\| bubble [0-9.]+% \(predicted 11\.1%\)' <<<"$out" || fail "no measured/predicted bubble on the step line"
first=$(grep -o '"loss": [0-9.]*' "$work/metrics.jsonl" | head -1 | awk '{print $2}')
last=$(grep -o '"loss": [0-9.]*' "$work/metrics.jsonl" | tail -1 | awk '{print $2}')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "loss did not fall ($first -> $last)"
grep -q '"val_loss"' "$work/metrics.jsonl" || fail "no val_loss in the metrics file"
# The metrics file is for programs: losses, learning rate and gradient norm at full (17-digit) precision.
python3 - "$work/metrics.jsonl" <<'PY' || fail "metrics are not JSON lines at full precision"
import json, sys
for line in open(sys.argv[1]):
    raw = {k.strip().strip('"'): v.strip() for k, v in (item.split(":", 1) for item in line.strip()[1:-1].split(","))}
    json.loads(line)
    for key in ("loss", "lr", "grad_norm"):
        digits = raw[key].lstrip("-").replace(".", "").split("e")[0].lstrip("0")
        assert len(digits) >= 15, (key, raw[key])
PY
grep -aEq "busy time per step across 4 ranks: min [0-9.]+ / median [0-9.]+ / max [0-9.]+ s; slowest rank [0-3]" <<<"$out" || fail "no straggler report"
[ -s "$work/ckpt/model-final.h5" ] || fail "no final weights"
grep -aq '^sample: ' <<<"$out" || fail "no sample text"
# The metrics file renders to a picture of the loss, learning-rate and throughput curves.
"$src/tools/dtrain-plot" "$work/metrics.jsonl" "$work/metrics.png" || fail "dtrain-plot"
[ "$(head -c 8 "$work/metrics.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "dtrain-plot did not write a PNG"
"$src/tools/dtrain-plot" "$work/missing.jsonl" 2>&1 | grep -q "dtrain-plot: error: .*missing" || fail "dtrain-plot on a missing file"
echo PASS
