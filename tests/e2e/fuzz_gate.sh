#!/usr/bin/env bash
# The test command's fuzz stage is a deterministic gate: tools/fuzz --smoke fuzzes every target of
# tests/fuzz from a fixed libFuzzer seed for a fixed number of executions, with no per-input time limit
# and no address randomization (its commands, printed by --print); random, time-boxed fuzzing is --long.
#   fuzz_gate.sh SOURCE_DIR
set -u
src=$1
source "$(dirname "$0")/lib.sh"
"$src/tools/fuzz" --smoke --print > "$work/smoke.txt" || fail "tools/fuzz --smoke --print"
"$src/tools/fuzz" --long --print > "$work/long.txt" || fail "tools/fuzz --long --print"
targets=$(sed -n '/set(DTRAIN_FUZZ_TARGETS/,/)/p' "$src/tests/fuzz/CMakeLists.txt" | sed 's/set(DTRAIN_FUZZ_TARGETS//; s/)//')
[ -n "$targets" ] || fail "no targets found in tests/fuzz/CMakeLists.txt"
for t in $targets; do
  line=$(grep "/fuzz_$t " "$work/smoke.txt") || fail "--smoke does not fuzz $t"
  for want in "^setarch [a-z0-9_]* --addr-no-randomize " " -seed=1 " " -runs=[0-9][0-9]* " " -timeout=0 "; do
    grep -qE -- "$want" <<<"$line" || fail "--smoke runs $t without '$want': $line"
  done
  grep -q -- "-max_total_time" <<<"$line" && fail "--smoke fuzzes $t for a time, not a number of executions"
  grep -q -- "-max_total_time=300 -timeout=1 " "$work/long.txt" || fail "--long is not time-boxed with a 1 s limit per input"
done
echo "--smoke: $(wc -l < "$work/smoke.txt") targets, each from seed 1 for a fixed number of executions"
echo PASS
