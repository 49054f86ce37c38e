#!/usr/bin/env bash
# A blend of two Megatron datasets (data.path = "0.7 A 0.3 B") trains the same model at dp=1 (one
# micro-batch of 16) and dp=4 (two micro-batches of 2 per rank):
# the same losses step by step, because the blend's choice of dataset and window is a pure function of
# (seed, stream, step, sample): within reorder_tol 2048 3 (lib.sh; a weight gradient sums the 16 x 128
# tokens of a step in another order; the validation loss follows 3 updates). A run on A alone differs
# by more than that, so B is really drawn from.
#   megatron_blend_layouts.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
for i in $(seq 1 60); do printf 'Call me Ishmael. Some years ago, never mind how long precisely, having little money.\n\n'; done > "$work/a.txt"
seq 1 3000 | paste -sd' ' | fold -w 70 | awk '{ print } NR % 5 == 0 { print "" }' > "$work/b.txt"
"$tool" --format megatron --out "$work/a" "$work/a.txt" > /dev/null || fail "dtrain-data a"
"$tool" --format megatron --out "$work/b" "$work/b.txt" > /dev/null || fail "dtrain-data b"
train() {  # train NAME NP MICRO_BATCH DATA_PATH: 3 steps of 16 samples, tp=1, pp=1, so dp = NP
  "$here/run_mpi.sh" 120 "$2" "$dtrain" "$src/inputs/tiny.ini" --data.format=megatron "--data.path=$4" \
    --model.global_batch_size=16 "--model.micro_batch_size=$3" \
    --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --training.train_iters=3 \
    --training.eval_interval=3 --training.eval_iters=1 --logging.log_interval=1 --checkpoint.dir= "$smooth_adam" "$no_sample" "$given_peak" \
    "--logging.metrics_file=$work/$1.jsonl" > "$work/$1.log" 2>&1
  grep -av '^sample' "$work/$1.log" | grep -aE '^(step|dtrain|rank-exit)'
  [ "$(grep -c '^rank-exit [0-9]* 0$' "$work/$1.log")" -eq "$2" ] || fail "$1: not every rank exited 0"
}
# Different micro-batches too (one of 16 samples; 2 x 2 per rank), so no two runs cut the batch alike.
train dp1 1 16 "0.7 $work/a 0.3 $work/b"
train dp4 4 2 "0.7 $work/a 0.3 $work/b"
train only_a 1 16 "$work/a"
/usr/bin/python3 - "$work" "$(reorder_tol 2048 3)" <<'PY' || fail "losses differ"
import json, sys
work, tol = sys.argv[1], float(sys.argv[2])
def losses(name):
    rows = [json.loads(l) for l in open("%s/%s.jsonl" % (work, name))]
    return [r["loss"] for r in rows if "loss" in r], [r["val_loss"] for r in rows if "val_loss" in r]
dp1, dp4, only_a = losses("dp1"), losses("dp4"), losses("only_a")
print("dp=1 losses", dp1, "\ndp=4 losses", dp4, "\nA alone", only_a)
assert len(dp1[0]) == 3 and len(dp1[1]) == 1, dp1
worst = max(abs(x - y) / abs(x) for x, y in zip(dp1[0] + dp1[1], dp4[0] + dp4[1]))
print("dp=4 against dp=1: largest relative deviation %.2e, tolerance %.2e" % (worst, tol))
assert worst <= tol, "dp=1 and dp=4 differ"
assert abs(dp1[0][0] - only_a[0][0]) / abs(dp1[0][0]) > tol, "the blend trains like A alone"
PY
echo PASS
