#!/usr/bin/env bash
# dtrain on bad Megatron data (data.format=megatron), as a user would meet it: each case must end every
# rank of a 2-rank job within 10 s with one 'dtrain: error:' line naming the file (or the key).
#   megatron_bad_data.sh CASE DTRAIN DTRAIN_DATA SOURCE_DIR
#   CASE: missing_idx | truncated_idx | truncated_arrays | fewer_documents | bad_magic | bad_version | bad_dtype | short_bin |
#         token_out_of_vocab | token_out_of_vocab_late | too_short | blend_odd | blend_not_a_number | blend_negative | bad_split
set -u
case_name=$1 dtrain=$2 tool=$3 src=$4
here=$(dirname "$0")
source "$here/lib.sh"
for i in $(seq 1 40); do printf 'Call me Ishmael. Some years ago, never mind how long precisely.\n\n'; done > "$work/text.txt"
"$tool" --format megatron --out "$work/m" "$work/text.txt" > /dev/null || fail "dtrain-data"
path=$work/m
args=("$src/inputs/tiny.ini" --data.format=megatron --training.train_iters=1 --checkpoint.dir= --logging.metrics_file=
      --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1)
patch() {  # patch FILE OFFSET HEX: overwrite bytes at OFFSET
  printf "$(sed 's/../\\x&/g' <<<"$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
case $case_name in
  missing_idx) rm "$work/m.idx"; expected="cannot open the Megatron index '$work/m.idx'" ;;
  truncated_idx) truncate -s 20 "$work/m.idx"; expected="m.idx' is truncated: 20 bytes" ;;
  truncated_arrays) truncate -s -8 "$work/m.idx"; expected="m.idx' is truncated: its header declares 40 sequences" ;;
  fewer_documents)  # the header's document count 41 -> 40: the last document index is left outside the arrays
    patch "$work/m.idx" 26 2800000000000000
    expected="m.idx' holds 8 bytes after the arrays its header declares (40 sequences, 40 document indices)" ;;
  bad_magic) patch "$work/m.idx" 0 4e4f; expected="m.idx' is not a Megatron index" ;;
  bad_version) patch "$work/m.idx" 9 02; expected="m.idx' has index version 2, but dtrain reads version 1" ;;
  bad_dtype) patch "$work/m.idx" 17 06; expected="m.idx' stores float64 tokens (dtype code 6)" ;;
  short_bin) truncate -s -2 "$work/m.bin"; expected="m.bin' is shorter than its index says" ;;
  token_out_of_vocab)  # one uint16 token 300 (beyond the byte vocabulary) at token 10: rank 0's half
    patch "$work/m.bin" 20 2c01; expected="m.bin' holds token id 300 at token 10" ;;
  token_out_of_vocab_late)  # one uint16 token 300 at token 2000 of 2535: in rank 1's half of the scan
    patch "$work/m.bin" 4000 2c01
    expected="rank 1: Megatron dataset file '$work/m.bin' holds token id 300 at token 2000 of its documents" ;;
  too_short) args+=(--model.seq_length=4096); expected="the train part of Megatron dataset '$work/m'" ;;
  blend_odd) path="0.7 $work/m 0.3"; expected="3 words, an odd count" ;;
  blend_not_a_number) path="0.7 $work/m heavy $work/m"; expected="weight 'heavy' is not a number" ;;
  blend_negative) path="0.7 $work/m -0.3 $work/m"; expected="weight -0.3 of '$work/m' must be > 0" ;;
  bad_split) args+=(--data.split=90,x); expected="'data.split' = '90,x' is not accepted" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
"$here/expect_error.sh" 2 "$expected" "$dtrain" "${args[@]}" "--data.path=$path"
