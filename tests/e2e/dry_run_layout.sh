#!/usr/bin/env bash
# The dry run at 8 ranks, tp=2 pp=2 prints exactly the groups of the golden table and exits 0 on every rank.
#   dry_run_layout.sh DTRAIN SOURCE_DIR
set -u
dtrain=$1 src=$2
here=$(dirname "$0")
out=$("$here/run_mpi.sh" 60 8 "$dtrain" --dry-run "$src/inputs/tiny.ini" \
      --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=2 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: rc=$rc"; exit 1; }
[ "$(grep -c '^rank-exit [0-9]* 0$' <<<"$out")" -eq 8 ] || { echo "FAIL: not every rank exited 0"; exit 1; }
grep -E '^  [A-Za-z]+ groups:' <<<"$out" | sed -E 's/^ +//; s/: +/: /' > /tmp/dry_run_groups.$$
if ! diff -u "$src/tests/golden/layout_np8_tp2_pp2.txt" /tmp/dry_run_groups.$$; then
  rm -f /tmp/dry_run_groups.$$; echo "FAIL: groups differ from the golden table"; exit 1
fi
rm -f /tmp/dry_run_groups.$$
for want in "gradient-accumulation steps" "predicted bubble" "memory per rank" "rank 7: node"; do
  grep -q "$want" <<<"$out" || { echo "FAIL: dry run does not show '$want'"; exit 1; }
done
echo PASS
