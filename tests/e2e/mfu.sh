#!/usr/bin/env bash
# MFU never exceeds 100%: the peak is the node's sgemm on all its cores, measured once, and the FLOP
# count is the honest one (causal attention counted half). Attention-heavy shapes (T=1024, d=32),
# where counting attention whole would overstate the work twofold, on 1 rank (mpirun binds it to one
# core), on a singleton run (both cores) and on 4 ranks sharing 2 cores (tp=2 x pp=2); and against a
# peak given with logging.mfu_peak_tflops instead of measured.
#   mfu.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
source "$(dirname "$0")/lib.sh"
make_small_data "$tool" 200
args=("$src/inputs/tiny.ini" "--data.path=$work/d" --model.seq_length=1024 --model.hidden_size=32 --model.num_attention_heads=2
      --model.num_layers=4 --model.global_batch_size=4 --model.micro_batch_size=1 --training.train_iters=12 --training.eval_interval=0
      --checkpoint.dir= --logging.log_interval=1 "$no_sample")
check() {  # check NAME: every logged MFU in (0, 1]
  local n
  n=$(grep -o '"mfu": [0-9.e+-]*' "$work/$1.jsonl" | awk '{ if ($2 <= 0 || $2 > 1) bad++; n++ } END { print (bad ? -1 : n) }')
  grep -m1 '^dtrain: ' "$work/$1.log"
  grep '^step 12' "$work/$1.log"
  [ "$n" -gt 0 ] || fail "$1: an MFU outside (0, 100%]: $(grep -o '"mfu": [0-9.e+-]*' "$work/$1.jsonl" | sort -t' ' -k2 -g | tail -1)"
  grep -q "peak [0-9.]* GFLOP/s (sgemm on all [0-9]* core(s) of each node)" "$work/$1.log" || fail "$1: no peak on the first line"
}
timeout -k 5 120 mpirun -np 1 "$dtrain" "${args[@]}" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
  "--logging.metrics_file=$work/one.jsonl" > "$work/one.log" 2>&1 || { cat "$work/one.log"; fail "1 rank"; }
check one
timeout -k 5 120 "$dtrain" "${args[@]}" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
  --system.threads_per_rank=1 "--logging.metrics_file=$work/single.jsonl" > "$work/single.log" 2>&1 || { cat "$work/single.log"; fail "singleton"; }
check single
timeout -k 5 120 mpirun -np 4 "$dtrain" "${args[@]}" --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=2 \
  "--logging.metrics_file=$work/four.jsonl" > "$work/four.log" 2>&1 || { cat "$work/four.log"; fail "4 ranks"; }
check four
# A given peak (logging.mfu_peak_tflops, per node): nothing measured, the first line names it, and the
# MFU of every step is tokens/s x FLOPs per token over it: the FLOPs per token it implies are the same at
# every step and, within their printed 3 decimals, those of the first line.
timeout -k 5 120 mpirun -np 4 "$dtrain" "${args[@]}" --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=2 \
  --logging.mfu_peak_tflops=0.5 "--logging.metrics_file=$work/given.jsonl" > "$work/given.log" 2>&1 || { cat "$work/given.log"; fail "given peak"; }
grep -m1 '^dtrain: ' "$work/given.log"
grep -q "peak 500.0 GFLOP/s (logging.mfu_peak_tflops=0.5 for each node)" "$work/given.log" || fail "the first line does not name the given peak"
gflop_per_token=$(sed -n 's/^dtrain: .*, \([0-9.]*\) GFLOP\/token$/\1/p' "$work/given.log")
/usr/bin/python3 - "$work/given.jsonl" "$gflop_per_token" <<'PY' || fail "MFU is not tokens/s x FLOPs per token over the given peak"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
implied = [r["mfu"] * 500.0 / r["tokens_per_s"] for r in rows]  # GFLOP per token
spread = (max(implied) - min(implied)) / max(implied)
print("given peak: %d steps imply %.5f GFLOP/token (spread %.1e), the first line %s" % (len(rows), implied[0], spread, sys.argv[2]))
# MFU has 5 decimals (about 1e-3 of these values), tokens/s one; the first line 3 decimals of GFLOP/token.
sys.exit(not (spread < 5e-3 and abs(implied[0] - float(sys.argv[2])) <= 0.0005 * 1.01))
PY
echo PASS
