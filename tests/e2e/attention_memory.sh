#!/usr/bin/env bash
# Attention keeps no (T,T) matrix: a rank's memory grows linearly with the sequence, in the plan's
# estimate and in the measured peak. One training step of a 4-layer, 4-head, 128-wide model on one rank
# (host backend) at T = 1024, 2048 and 4096.
#   attention_memory.sh DTRAIN DTRAIN_DATA SOURCE_DIR
# Checks, with P(T) the plan's prediction and M(T) the measured peak resident memory (VmHWM):
#   - P is linear: P(4096) - P(2048) = 2 (P(2048) - P(1024)) within 1% (pieces are rounded up to 64 bytes);
#   - M grows as P does: the growth M(4096) - M(1024) is within 10% + 8 MiB of P(4096) - P(1024) (allocator
#     and page granularity); the scores of one head of one layer as a (T,T) fp32 matrix would alone
#     add 4096^2 x 4 B = 64 MiB at T = 4096 (four heads: 256 MiB), well beyond that;
#   - M is linear: (M(4096) - M(2048)) / (M(2048) - M(1024)) is between 1.8 and 2.2 (a T^2 term gives 4).
set -u
dtrain=$1 data_tool=$2 src=$3
source "$(dirname "$0")/lib.sh"
make_small_data "$data_tool" 200  # ~15k tokens: a 4097-token sample fits
declare -A P M
for T in 1024 2048 4096; do
  timeout -k 5 120 mpirun -np 1 "$dtrain" "$src/inputs/tiny.ini" --data.path="$work/d" --model.seq_length=$T \
    --model.global_batch_size=1 --model.micro_batch_size=1 --system.tensor_model_parallel_size=1 \
    --system.pipeline_model_parallel_size=1 --training.train_iters=1 --training.eval_interval=0 --checkpoint.dir= \
    --logging.sample_tokens=0 "--logging.metrics_file=$work/m$T.jsonl" > "$work/t$T.log" 2>&1 ||
    { cat "$work/t$T.log"; fail "training at T=$T"; }
  P[$T]=$(sed -n 's/.*the plan predicts \([0-9.]*\) MiB.*/\1/p' "$work/t$T.log")
  M[$T]=$(grep -o '"peak_rss_bytes": [0-9]*' "$work/m$T.jsonl" | tail -1 | awk '{print $2 / 1048576}')
  [ -n "${P[$T]}" ] && [ -n "${M[$T]}" ] || fail "T=$T: no prediction or no measured peak"
  echo "T=$T: predicted ${P[$T]} MiB, measured peak ${M[$T]} MiB"
done
awk -v p1="${P[1024]}" -v p2="${P[2048]}" -v p4="${P[4096]}" -v m1="${M[1024]}" -v m2="${M[2048]}" -v m4="${M[4096]}" 'BEGIN {
  ok = 1
  if ((p4 - p2) < 0.99 * 2 * (p2 - p1) || (p4 - p2) > 1.01 * 2 * (p2 - p1)) { print "FAIL: the prediction is not linear in T"; ok = 0 }
  grow = m4 - m1; want = p4 - p1; d = grow - want; if (d < 0) d = -d
  if (d > 0.10 * want + 8) { printf "FAIL: the peak grew %.1f MiB from T=1024 to 4096, the plan %.1f\n", grow, want; ok = 0 }
  r = (m4 - m2) / (m2 - m1)
  if (r < 1.8 || r > 2.2) { printf "FAIL: the peak grows by %.2f x from the first doubling to the second, not 2\n", r; ok = 0 }
  if (ok) printf "growth %.1f MiB measured, %.1f predicted; doubling ratio %.2f\n", grow, want, r
  exit !ok }' || fail "memory is not linear in the sequence length"
echo PASS
