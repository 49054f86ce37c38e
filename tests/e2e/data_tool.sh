#!/usr/bin/env bash
# dtrain-data as a user runs it.
#   data_tool.sh split DTRAIN_DATA                 two text files -> PREFIX.train.bin + PREFIX.val.bin:
#       sizes 32 + count, the magic, and the bodies together equal the concatenated text
#   data_tool.sh error DTRAIN_DATA EXPECTED ARGS... must exit 2 with one 'dtrain-data: error:' line
#       on stderr that contains EXPECTED
set -u
mode=$1 tool=$2; shift 2
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check_split() {
  seq 1 1000 > "$work/a.txt"          # 3893 bytes
  printf 'Call me Ishmael.\n' > "$work/b.txt"   # 17 bytes; 3910 in all, 391 of them to val
  "$tool" --out "$work/out/sub/corpus" --val-fraction 0.1 "$work/a.txt" "$work/b.txt" || fail "rc=$?"
  local train=$work/out/sub/corpus.train.bin val=$work/out/sub/corpus.val.bin
  [ -f "$train" ] && [ -f "$val" ] || fail "output files missing"
  [ "$(stat -c %s "$train")" -eq $((32 + 3519)) ] || fail "train size $(stat -c %s "$train"), want $((32 + 3519))"
  [ "$(stat -c %s "$val")" -eq $((32 + 391)) ] || fail "val size $(stat -c %s "$val"), want $((32 + 391))"
  [ "$(head -c 8 "$train")" = DTRAINTK ] || fail "train file lacks the magic"
  cmp <(cat "$work/a.txt" "$work/b.txt") <(tail -c +33 "$train"; tail -c +33 "$val") ||
    fail "token bytes differ from the text"
}

check_error() {
  local expected=$1; shift
  "$tool" "$@" >"$work/stdout" 2>"$work/stderr"
  local rc=$?
  cat "$work/stdout" "$work/stderr"
  [ "$rc" -eq 2 ] || fail "exit code $rc, want 2"
  [ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "stderr is not one line"
  grep -q '^dtrain-data: error: ' "$work/stderr" || fail "not a 'dtrain-data: error:' line"
  grep -qF -- "$expected" "$work/stderr" || fail "error does not mention '$expected'"
}

case $mode in
  split) check_split ;;
  error) check_error "$@" ;;
  *) fail "unknown mode $mode" ;;
esac
echo PASS
