#!/usr/bin/env bash
# A bad input, tried as a user would: it must end within 10 s with a non-zero exit on every rank and a
# one-line error containing EXPECTED, printed once (by rank 0).
#   expect_error.sh NP EXPECTED DTRAIN ARGS...
set -u
np=$1 expected=$2; shift 2
here=$(dirname "$0")
start=$(date +%s.%N)
out=$("$here/run_mpi.sh" 10 "$np" "$@" 2>&1)
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
echo "$out"
echo "--- rc=$rc elapsed=${elapsed}s"
fail() { echo "FAIL: $*"; exit 1; }
# run_mpi.sh lets every rank finish (mpirun then exits 0), so the verdict is each rank's own exit code.
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "timed out (hang)"
n_exits=$(grep -c '^rank-exit [0-9]* [1-9]' <<<"$out")
[ "$n_exits" -eq "$np" ] || fail "expected $np ranks to exit non-zero, saw $n_exits"
n_msg=$(grep -F -c -- "$expected" <<<"$out")
[ "$n_msg" -eq 1 ] || fail "expected the message '$expected' exactly once, saw $n_msg"
grep -F -- "$expected" <<<"$out" | grep -q '^dtrain: error: ' || fail "message is not a 'dtrain: error:' line"
echo "PASS"
