#!/usr/bin/env bash
# A Megatron dataset with a tokenizer other than bytes: dtrain-data --format megatron --train-tokenizer
# sentencepiece trains a 500-piece model on two text files (the project's README and ARCHITECTURE) and
# writes PREFIX.bin/.idx; megatron_format.py reads it by the published layout and checks every document
# is Debian's python3-sentencepiece encoding of its paragraph; then 3 steps on 2 ranks train on it with
# data.format=megatron data.tokenizer=sentencepiece:MODEL (validation on data.split's valid part), and
# dtrain generate decodes from the final weights (whose tokenizer identity it checks).
#   megatron_sentencepiece.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
texts=("$src/README.md" "$src/docs/ARCHITECTURE.md")
"$tool" --format megatron --train-tokenizer sentencepiece --vocab-size 500 --out "$work/sp" "${texts[@]}" > "$work/data.log" 2>&1 ||
  { cat "$work/data.log"; fail "dtrain-data"; }
cat "$work/data.log"
/usr/bin/python3 "$here/megatron_format.py" encoded "$work/sp" "$work/sp.model" "${texts[@]}" || fail "the dataset's ids"
args=("$src/inputs/tiny.ini" --data.format=megatron "--data.path=$work/sp" "--data.tokenizer=sentencepiece:$work/sp.model"
      --model.vocab_size=512 --model.seq_length=64 --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1
      --training.train_iters=3 --training.eval_interval=3 --training.eval_iters=1 --logging.log_interval=1
      "--checkpoint.dir=$work/ck" "--logging.metrics_file=$work/metrics.jsonl" "$no_sample" "$given_peak")
out=$("$here/run_mpi.sh" 240 2 "$dtrain" "${args[@]}" 2>&1)
grep -aE "^(step +[0-9]+/|dtrain|rank-exit)" <<<"$out"
[ "$(grep -c '^rank-exit [0-9]* 0$' <<<"$out")" -eq 2 ] || { echo "$out"; fail "not every rank exited 0"; }
grep -q '"val_loss"' "$work/metrics.jsonl" || fail "no validation loss in the metrics"
out=$("$dtrain" generate "${args[@]}" --prompt "The data" --tokens 8 2>&1) || { echo "$out"; fail "generate"; }
echo "$out"
grep -q "^The data" <<<"$out" || fail "generate did not continue the prompt"
echo PASS
