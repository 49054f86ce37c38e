#!/usr/bin/env bash
# dtrain calibrate: `mpirun -np 2 dtrain calibrate --out F --quick` writes, in well under a minute, a
# cluster description that dtrain plan reads (2 devices on 1 node, a GEMM efficiency table, and one per
# GEMM width, a measured link with its all-reduce and reduce-scatter rates, the elementwise and release
# rates, attention's cost per score beyond its GEMMs, or its report that the GEMMs took it all on a loaded
# machine), and `dtrain plan --layout` costs one layout with
# it: the step, its breakdown in seconds,
# and a refusal of a layout dtrain does not accept. --out is required; an input file is refused; an
# unwritable --out ends every rank.
#   calibrate.sh DTRAIN SOURCE_DIR
set -u
dtrain=$1 src=$2
source "$(dirname "$0")/lib.sh"

start=$(date +%s)
timeout -k 5 60 mpirun -np 2 "$dtrain" calibrate --out "$work/here.ini" --quick > "$work/cal.txt" 2>&1 ||
  { cat "$work/cal.txt"; fail "dtrain calibrate exited $?"; }
cat "$work/cal.txt" "$work/here.ini"
echo "  calibrated in $(( $(date +%s) - start )) s"
grep -q '^devices_per_node = 2$' "$work/here.ini" || fail "2 ranks on one node should give devices_per_node = 2"
grep -qE '^gemm_efficiency = [0-9.e+]+:[0-9.e-]+(, [0-9.e+]+:[0-9.e-]+){3,}$' "$work/here.ini" ||
  fail "the efficiency table should have several measured points"
grep -qE '^intra_node_bandwidth_gb_s = [0-9.e+-]+$' "$work/here.ini" || fail "no measured link bandwidth"
grep -qE '^gemm_efficiency_by_width = ([0-9]+/[0-9.e+]+:[0-9.e-]+, )+[0-9]+/[0-9.e+]+:[0-9.e-]+$' "$work/here.ini" &&
  [ "$(grep '^gemm_efficiency_by_width' "$work/here.ini" | grep -oE '(= |, )[0-9]+/' | sort -u | wc -l)" -ge 2 ] ||
  fail "the efficiency table per width should hold curves of several widths"
for key in elementwise_gb_s released_memory_gb_s intra_node_all_reduce_gb_s intra_node_reduce_scatter_gb_s; do
  grep -qE "^$key = [0-9.e+-]*[1-9][0-9.e+-]*$" "$work/here.ini" || fail "no measured $key"
done
# The attention's time beyond its GEMMs is a difference of two timings of a --quick run; on a loaded
# machine the GEMM side can take all of it, and then calibrate reports 0 and writes no key (the cost
# model's default stands). Either way the measurement must have been made and reported.
if ! grep -qE "^attention_score_ns = [0-9.e+-]*[1-9][0-9.e+-]*$" "$work/here.ini"; then
  grep -q "attention beyond its GEMMs 0.000 ns per causal score" "$work/cal.txt" || fail "no measured attention_score_ns"
  echo "  attention_score_ns: the GEMMs took all of the attention's time in this run (a loaded machine); no key written"
fi

# The description parses: cost one layout of the tiny model on it.
"$dtrain" plan "$src/inputs/tiny.ini" --cluster "$work/here.ini" --layout tp=1,pp=2,dp=1,mb=2,recompute=full > "$work/one.txt" 2>&1 ||
  { cat "$work/one.txt"; fail "dtrain plan --layout with the calibrated description exited $?"; }
cat "$work/one.txt"
grep -qE '^predicted_step_s = [0-9.e+-]+$' "$work/one.txt" || fail "--layout printed no predicted_step_s line"
grep -qE '^seconds: compute [0-9.e+-]+ \(recompute [0-9.e+-]*[1-9]' "$work/one.txt" || fail "full recomputation costs nothing"
grep -q 'tp=1 cp=1 pp=2 dp=1 ep=1 v=1 zero=0 schedule=1f1b micro_batch=2 recompute=full' "$work/one.txt" || fail "--layout did not cost the layout given"

# An --out rank 0 cannot write ends every rank with exit 2 and the path named.
timeout -k 5 60 mpirun -np 2 bash -c '"$@"; echo "rank-exit $?"' _ "$dtrain" calibrate --quick --out "$work/no/such/dir/x.ini" \
  > "$work/unwritable.txt" 2>&1
[ "$(grep -c '^rank-exit 2$' "$work/unwritable.txt")" -eq 2 ] && grep -q "cannot write --out" "$work/unwritable.txt" ||
  { cat "$work/unwritable.txt"; fail "an unwritable --out did not end both ranks with exit 2 naming it"; }

# A layout dtrain refuses (3 stages of 4 layers), an unknown key, a world the description lacks.
expect() {
  "$dtrain" plan "$src/inputs/tiny.ini" --cluster "$work/here.ini" "$@" > "$work/bad.txt" 2>&1
  local rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "$1" "$work/bad.txt" || { cat "$work/bad.txt"; fail "expected exit 2 naming '$1' for $*"; }
}
expect "--layout is refused" --layout pp=3
expect "unknown key 'tq'" --layout tq=2
expect "--nodes 1 gives 2" --layout tp=1,pp=1,dp=4 --nodes 1
"$dtrain" calibrate > "$work/noout.txt" 2>&1; [ $? -eq 2 ] && grep -q -- "needs --out FILE" "$work/noout.txt" || fail "calibrate without --out"
"$dtrain" calibrate "$src/inputs/tiny.ini" --out x > "$work/input.txt" 2>&1
[ $? -eq 2 ] && grep -q "takes no input file" "$work/input.txt" || fail "calibrate with an input file"
echo "PASS"
