#!/usr/bin/env bash
# dtrain generate as a user runs it, on the final weights of a small model trained here.
#   generate.sh CASE DTRAIN DTRAIN_DATA SOURCE_DIR
#   streams        one prompt's text is printed as its tokens come: a run of 10^9 tokens shows text within
#                  seconds, and SIGTERM ends it at the next token with exit 3 and a line saying so (generation
#                  used to print nothing until the end, keep every token in memory, and go on after SIGTERM)
#   nan_weights    a weights file with a NaN (h5py writes it): one error naming the file and the tensor, exit 2
#                  (generation used to go on with it)
#   seed_negative  --seed -1: one error (it used to become 2^64-1)
#   prompt_and_prompts  --prompt beside --prompts: one error (--prompt used to be ignored)
set -u
case_name=$1 dtrain=$2 tool=$3 src=$4
source "$(dirname "$0")/lib.sh"
make_small_data "$tool"
args=("$src/inputs/tiny.ini" "--data.path=$work/d" "--checkpoint.dir=$work/ck")
timeout 120 "$dtrain" "${args[@]}" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --training.train_iters=2 \
  --training.eval_interval=0 "$no_sample" "$given_peak" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "training"; }
# expect_generate_error EXPECTED ARGS...: exit 2, the error once, nothing generated
expect_generate_error() {
  local expected=$1
  shift
  timeout 60 "$dtrain" generate "${args[@]}" "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  cat "$work/out" "$work/err"
  [ $rc -eq 2 ] || fail "exit code $rc, want 2"
  [ "$(grep -cF -- "$expected" "$work/err")" -eq 1 ] || fail "the error does not say '$expected' once"
}

case $case_name in
  streams)
    "$dtrain" generate "${args[@]}" --prompt "Call me" --tokens 1000000000 > "$work/out" 2> "$work/err" &
    pid=$!  # the launcher executes dtrain-main in its own process: this is the generating process
    on_exit+=("kill -9 $pid 2>/dev/null")  # whatever happens here: a generation that ignores signals never outlives the test
    for _ in $(seq 1 100); do [ "$(wc -c < "$work/out")" -gt 200 ] && break; sleep 0.1; done
    [ "$(wc -c < "$work/out")" -gt 200 ] || fail "no text after 10 s of a long generation: it is not streamed"
    head -c 60 "$work/out"; echo " ..."
    grep -q "^Call me" "$work/out" || fail "the prompt does not start the text"
    kill -TERM $pid
    t0=$(date +%s.%N)
    for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -0 $pid 2>/dev/null && fail "generation went on for 10 s after SIGTERM"
    wait $pid
    rc=$?
    took=$(echo "$(date +%s.%N) - $t0" | bc)
    cat "$work/err"
    echo "exit $rc $took s after SIGTERM"
    [ $rc -eq 3 ] || fail "exit code $rc after SIGTERM, want 3"
    [ "$(echo "$took < 5" | bc)" -eq 1 ] || fail "generation went on for $took s after SIGTERM"
    grep -q "dtrain generate: stopped by SIGTERM after [0-9]* of 1000000000 tokens" "$work/err" || fail "no line saying it stopped" ;;
  nan_weights)
    /usr/bin/python3 -c "
import h5py
with h5py.File('$work/ck/model-final.h5', 'r+') as f: f['h0.fc_w'][3, 5] = float('nan')" ||
      fail "h5py could not edit the weights"
    expect_generate_error "weights file '$work/ck/model-final.h5': tensor 'h0.fc_w' holds non-finite values (NaN or infinity)" --tokens 4 ;;
  seed_negative) expect_generate_error "--seed '-1' is not a whole number from 0 to 18446744073709551615" --seed -1 ;;
  prompt_and_prompts) printf 'one\ntwo\n' > "$work/p.txt"
    expect_generate_error "give --prompt or --prompts, not both" --prompt hello --prompts "$work/p.txt" ;;
  *) fail "unknown case $case_name" ;;
esac
echo PASS
