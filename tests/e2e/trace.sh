#!/usr/bin/env bash
# The timeline of a tp=1 pp=4 run: per-rank Chrome traces merge into one JSON with one track per rank,
# and the bubble the trace shows matches the step line's measured bubble within 10%.
#   trace.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
source "$(dirname "$0")/lib.sh"
make_small_data "$tool"
timeout -k 5 120 mpirun -np 4 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --system.tensor_model_parallel_size=1 \
  --system.pipeline_model_parallel_size=4 --model.global_batch_size=8 --model.micro_batch_size=1 --training.train_iters=8 \
  --checkpoint.dir= --logging.log_interval=1 --training.eval_interval=0 "--logging.metrics_file=$work/m.jsonl" "$no_sample" "$given_peak" \
  "--logging.trace_file=$work/trace" > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "training"; }
"$src/tools/trace-merge" "$work/trace" > "$work/merge.log" || { cat "$work/merge.log"; fail "trace-merge"; }
cat "$work/merge.log"
python3 - "$work/trace.json" <<'PY' || fail "merged trace is not a timeline with one track per rank"
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
tracks = {e["pid"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
assert tracks == {0, 1, 2, 3}, tracks
for r in range(4):
    kinds = {e.get("cat") for e in ev if e.get("pid") == r and e.get("ph") == "X"}
    assert {"forward", "backward", "step", "optimizer"} <= kinds, (r, kinds)
    if r > 0: assert "p2p" in kinds, (r, kinds)
print("trace: 4 tracks, forward/backward/p2p/optimizer events on each")
PY
traced=$(sed -n 's/.*mean pipeline bubble \([0-9.]*\)%.*/\1/p' "$work/merge.log")
measured=$(grep -o '"bubble": [0-9.]*' "$work/m.jsonl" | tail -n +2 | awk '{s += $2; n++} END {printf "%.1f", 100 * s / n}')
echo "bubble: trace ${traced}%, step line ${measured}%"
# Not rounding but timing: the trace measures idle time between its events, the step line between its
# own timer reads, around the same waits; they differ by the work between a wait and the nearest
# timestamp (a few percent of the bubble) and by timer reads of a step on oversubscribed cores (up to
# 2 points of the step): within 10% of the bubble plus 2 points.
awk -v t="$traced" -v m="$measured" 'BEGIN { d = t - m; if (d < 0) d = -d; exit !(d <= 0.1 * m + 2) }' ||
  fail "the trace's bubble (${traced}%) is not within 10% of the measured one (${measured}%)"
echo PASS
