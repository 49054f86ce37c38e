#!/usr/bin/env bash
# dtrain plan: the table of the fastest layouts has --top rows, each with its sizes, tokens/s, MFU and
# breakdown; the winner's overrides are printed; the 70B model on 1,024 DGX H100 nodes plans in under
# 10 s; a model that fits nowhere exits 2 with the memory that would fit (every rank, under mpirun);
# --help and a bad cluster file are clear.
#   plan.sh DTRAIN SOURCE_DIR
set -u
dtrain=$1 src=$2
source "$(dirname "$0")/lib.sh"
clusters=$src/inputs/clusters

start=$(date +%s.%N)
"$dtrain" plan "$src/inputs/plan/llama2-70b.ini" --cluster "$clusters/dgx-h100.ini" --nodes 1024 --top 4 > "$work/big.txt" 2>&1 ||
  { cat "$work/big.txt"; fail "dtrain plan of the 70B model exited $?"; }
seconds=$(echo "$(date +%s.%N) - $start" | bc)
cat "$work/big.txt"
echo "  planned 8192 devices in $seconds s"
[ "$(echo "$seconds < 10" | bc)" -eq 1 ] || fail "planning took $seconds s (more than 10)"
grep -q "= 8192 ranks" "$work/big.txt" || fail "--nodes 1024 did not give 8192 ranks"
# Rows: rank, 5 sizes, mb, m, recompute, zero, step s, tokens/s, MFU%, GB/rank, bubble%, |, 5 shares.
rows=$(grep -cE '^ +[0-9]+( +[0-9]+){4} +(-|1f1b|int|zb-h1|zbv)( +[0-9]+){3} +(none|selective|full) +[0-9-]+ +[0-9.]+ +[0-9]+ +[0-9.]+% +[0-9.]+ +[0-9.]+% \|( +[0-9.]+){5}$' "$work/big.txt")
[ "$rows" -eq 4 ] || fail "expected 4 layout rows (--top 4), found $rows"
# Each row's shares of the step add up to 100%: five shares printed to 0.1 (%.1f) round their sum by at
# most 5 x 0.05 = 0.25, so within 0.5.
grep -E '^ +[0-9]+ .*\|' "$work/big.txt" | grep -v '#' | awk -F'|' '{ split($2, a, " "); s = a[1]+a[2]+a[3]+a[4]+a[5];
  if (s < 99.5 || s > 100.5) { print "shares add to " s; bad = 1 } } END { exit bad }' || fail "a breakdown does not add to 100%"
for key in tensor_model_parallel_size pipeline_model_parallel_size virtual_pipeline_model_parallel_size micro_batch_size \
           recompute_granularity use_distributed_optimizer; do
  grep -q -- "--[a-z]*\.$key=" "$work/big.txt" || fail "the winner's overrides lack $key"
done

# 70B on one node: nothing fits an 80 GB GPU; the message names the memory that would.
"$dtrain" plan "$src/inputs/plan/llama2-70b.ini" --cluster "$clusters/dgx-h100.ini" --nodes 1 > "$work/small.txt" 2>&1
rc=$?
cat "$work/small.txt"
[ "$rc" -eq 2 ] || fail "nothing fits, but dtrain plan exited $rc (expected 2)"
grep -qE 'no layout fits the 80.0 GB per device .* needs [0-9.]+ GB per rank: use devices with at least [0-9.]+ GB' "$work/small.txt" ||
  fail "the nothing-fits message does not name the memory that would fit"

# Under mpirun rank 0 plans; its error ends every rank with exit 2, not rank 0 alone.
timeout -k 5 60 mpirun -np 2 bash -c '"$@"; echo "rank-exit $?"' _ "$dtrain" plan "$src/inputs/plan/llama2-70b.ini" \
  --cluster "$clusters/dgx-h100.ini" --nodes 1 > "$work/mpi.txt" 2>&1
[ "$(grep -c '^rank-exit 2$' "$work/mpi.txt")" -eq 2 ] || { cat "$work/mpi.txt"; fail "a plan error under mpirun did not end both ranks with exit 2"; }

# The small model on this kind of machine, with the scaling curves.
"$dtrain" plan "$src/inputs/tiny.ini" --cluster "$clusters/cpu-2core.ini" --top 2 --scaling 1,2,4 > "$work/tiny.txt" 2>&1 ||
  { cat "$work/tiny.txt"; fail "dtrain plan of tiny.ini exited $?"; }
cat "$work/tiny.txt"
grep -q "predicted scaling" "$work/tiny.txt" || fail "--scaling printed no curves"
[ "$(grep -cE '^ +[124] \|' "$work/tiny.txt")" -eq 3 ] || fail "--scaling 1,2,4 did not print 3 rows"
# A bad --scaling is refused before any planning is printed.
"$dtrain" plan "$src/inputs/tiny.ini" --cluster "$clusters/cpu-2core.ini" --scaling 2,x > "$work/badscale.txt" 2>&1
[ $? -eq 2 ] && grep -q -- "--scaling '2,x' must be device counts" "$work/badscale.txt" && ! grep -q "fastest layouts" "$work/badscale.txt" ||
  { cat "$work/badscale.txt"; fail "a bad --scaling is not refused up front"; }

"$dtrain" plan --help > "$work/help.txt" 2>&1 || fail "dtrain plan --help exited $?"
grep -q -- "--cluster FILE" "$work/help.txt" || fail "dtrain plan --help does not describe --cluster"
printf '[cluster]\nnodes = 1\n' > "$work/bad.ini"
"$dtrain" plan "$src/inputs/tiny.ini" --cluster "$work/bad.ini" > "$work/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "the key 'cluster.devices_per_node' is missing" "$work/bad.txt" ||
  { cat "$work/bad.txt"; fail "a cluster file without devices_per_node is not refused by name"; }
echo PASS
