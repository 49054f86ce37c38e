#!/usr/bin/env bash
# dtrain on bad training data, as a user would meet it: each case must end every rank within 10 s with
# one 'dtrain: error:' line naming the file.
#   bad_training_data.sh CASE DTRAIN DTRAIN_DATA SOURCE_DIR
#   CASE: missing | bad_magic | token_out_of_vocab | sequence_too_long
set -u
case_name=$1 dtrain=$2 tool=$3 src=$4
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool" 40
args=("$src/inputs/tiny.ini" "--data.path=$work/d" --training.train_iters=1 --checkpoint.dir= --logging.metrics_file=
      --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1)
case $case_name in
  missing)
    rm "$work/d.val.bin"; expected="d.val.bin" ;;
  bad_magic)
    printf 'NOTATOKN' | dd of="$work/d.train.bin" conv=notrunc status=none; expected="not a dtrain token file" ;;
  token_out_of_vocab)
    # the byte tokenizer's vocabulary is 256; a model with vocab_size 64 cannot take its tokens: refused
    # before the data is read
    args+=(--model.vocab_size=64); expected="has a vocabulary of 256, more than model.vocab_size=64" ;;
  sequence_too_long)
    args+=(--model.seq_length=4096); expected="fewer than model.seq_length+1" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
"$here/expect_error.sh" 2 "$expected" "$dtrain" "${args[@]}"
