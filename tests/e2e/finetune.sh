#!/usr/bin/env bash
# The fine-tuning journey end to end (README's Fine-tuning section runs these commands):
#   finetune.sh FAMILY DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE SOURCE_DIR
# FAMILY llama3: a small Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention, untied head) with Llama 3's
# tokenizer.json is exported to a Hugging Face directory with its tokenizer files; chat records in
# JSON Lines become fine-tuning data with a loss mask (dtrain-data --sft, the llama3 template); dtrain
# fine-tunes from the directory itself (checkpoint.init_from=hf:DIR) on 4 ranks at tp=2 pp=2 with packed
# conversations (data.pack), attention inside each (reset_attention_mask) and positions reset; the
# fine-tuned model is exported and read back (init_from=hf:DIR again), and its validation loss on the
# answers' tokens is lower than the base model's. The same fine-tuning on 1 rank gives the same first
# steps' losses within the derived bound of reordered fp32 sums; resumed from its step-8 checkpoint it
# gives the same steps 9-10 bit for bit.
# FAMILY qwen3: the same journey for a small Qwen3 (heads of 32 dims at hidden 64, their queries and keys
# RMS-normalised, exported as Qwen3ForCausalLM) with Qwen3's own tokenizer.json (NFC, Qwen's split) and
# the qwen3 chat template; the 1-rank comparison and the resume, properties of the layout, are the
# llama3 run's.
set -u
family=$1 dtrain=$2 tool=$3 consolidate=$4 src=$5
here=$(dirname "$0")
source "$here/lib.sh"
need_fetched "$src"
printf 'x\n' > "$work/x.txt"
case $family in
  llama3)
    node "$here/llama3_tokenizer_json.mjs" "$src/data/tokenizers/llama3-tokenizer-js" "$work/l3" "$work/x.txt" "$work/x.ids" > /dev/null ||
      fail "writing Llama 3's tokenizer.json"
    vocab=128256 template=llama3
    model_keys="rotary_base = 500000" ;;
  qwen3)
    cp -r "$src/data/tokenizers/qwen3" "$work/l3" || fail "Qwen3's tokenizer files"
    vocab=151680 template=qwen3  # Qwen3's 151669 tokens, rounded up to a multiple of tp
    model_keys=$(printf 'rotary_base = 1000000\nkv_channels = 32\nqk_layernorm = true\nnorm_epsilon = 1e-6') ;;
  *) fail "unknown family $family" ;;
esac

# Conversations with something to learn: each city's country, asked in a few ways.
/usr/bin/python3 - "$work/chat.jsonl" <<'EOF'
import json, random, sys
random.seed(3)
pairs = [("Paris", "France"), ("Berlin", "Germany"), ("Madrid", "Spain"), ("Rome", "Italy"), ("Lisbon", "Portugal"),
         ("Vienna", "Austria"), ("Oslo", "Norway"), ("Athens", "Greece"), ("Dublin", "Ireland"), ("Warsaw", "Poland")]
asks = ["Which country is {} in?", "{} is a city of which country?", "Name the country of {}."]
with open(sys.argv[1], "w") as f:
    for i in range(600):
        city, country = random.choice(pairs)
        msgs = [{"role": "user", "content": random.choice(asks).format(city)}, {"role": "assistant", "content": country + "."}]
        if i % 4 == 0:
            msgs = [{"role": "system", "content": "Answer with one word."}] + msgs
        f.write(json.dumps({"messages": msgs}) + "\n")
EOF
"$tool" --sft --tokenizer "hf:$work/l3" --chat-template $template --seq-length 64 --val-fraction 0.1 --out "$work/chat" "$work/chat.jsonl" \
  > "$work/data.log" || { cat "$work/data.log"; fail "dtrain-data --sft"; }
cat "$work/data.log"

cat > "$work/llama.ini" <<EOF
[model]
num_layers = 4
hidden_size = 64
num_attention_heads = 4
group_query_attention = true
num_query_groups = 2
ffn_hidden_size = 128
normalization = RMSNorm
position_embedding_type = rope
$model_keys
swiglu = true
untie_embeddings_and_output_weights = true
add_bias_linear = false
seq_length = 64
vocab_size = $vocab
global_batch_size = 8
micro_batch_size = 2
[system]
tensor_model_parallel_size = 2
pipeline_model_parallel_size = 2
[training]
train_iters = 10
eval_interval = 0
eval_iters = 2
[optimizer]
lr = 3e-3
min_lr = 3e-4
warmup_iters = 2
eps = 1e-4
[data]
path = $work/chat
tokenizer = hf:$work/l3
pack = true
reset_attention_mask = true
reset_position_ids = true
[logging]
log_interval = 1
EOF
run() {  # run NAME NP ARGS...
  local name=$1 np=$2
  shift 2
  timeout 300 mpirun -np "$np" "$dtrain" "$work/llama.ini" "$no_sample" "$given_peak" --logging.metrics_file="$work/$name.jsonl" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "$name"; }
}
# val_loss NAME: the validation loss a run logged
val_loss() { grep -o '"val_loss": [0-9.e+-]*' "$work/$1.jsonl" | tail -1 | awk '{print $2}'; }

# The base model: initial weights (one step at a learning rate of 1e-9), its validation loss on the
# answers, exported with the tokenizer's files.
run base 1 --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --training.train_iters=1 --optimizer.lr=1e-9 \
  --optimizer.min_lr=1e-9 --checkpoint.dir="$work/ck-base" --training.eval_interval=1
timeout 120 "$consolidate" "$work/ck-base/model-final.h5" --export-hf "$work/base-hf" --tokenizer "hf:$work/l3" > "$work/export-base.log" 2>&1 ||
  { cat "$work/export-base.log"; fail "exporting the base model"; }
[ -f "$work/base-hf/config.json" ] && [ -f "$work/base-hf/tokenizer.json" ] || fail "the base export lacks config.json or tokenizer.json"

# Fine-tuning from the directory, 4 ranks at tp=2 pp=2, and the same on 1 rank.
run ft4 4 --checkpoint.init_from="hf:$work/base-hf" --checkpoint.dir="$work/ck-ft4" --checkpoint.save_interval=8
grep -q "initialised the model from Hugging Face directory '$work/base-hf'" "$work/ft4.log" || { cat "$work/ft4.log"; fail "not initialised from hf:DIR"; }
grep -q "data: the samples carry the data's loss mask, attention inside documents, positions reset per document" "$work/ft4.log" ||
  { cat "$work/ft4.log"; fail "the samples' description is missing"; }
grep "data: the samples" "$work/ft4.log"
want_arch=$([ "$family" = qwen3 ] && echo Qwen3ForCausalLM || echo LlamaForCausalLM)
/usr/bin/python3 -c "import json, sys; sys.exit(json.load(open('$work/base-hf/config.json'))['architectures'] != ['$want_arch'])" ||
  { cat "$work/base-hf/config.json"; fail "the base model was not exported as $want_arch"; }
if [ "$family" = llama3 ]; then
run ft1 1 --checkpoint.init_from="hf:$work/base-hf" --checkpoint.dir="$work/ck-ft1" --system.tensor_model_parallel_size=1 \
  --system.pipeline_model_parallel_size=1 --training.train_iters=3
# The first 3 steps: the longest reordered sum is the vocabulary's (128256 logits, split over tp).
tol=$(reorder_tol 128256 2)
paste <(losses "$work/ft4.jsonl" | head -3) <(losses "$work/ft1.jsonl") | while read -r a b; do
  /usr/bin/python3 -c "import sys; a, b, t = $a, $b, $tol; print('tp2 pp2 %.6f, 1 rank %.6f, relative %.2e (tolerance %.2e)' % (a, b, abs(a - b) / b, t)); sys.exit(abs(a - b) > t * b)" ||
    fail "4 ranks and 1 rank differ beyond the bound"
done || exit 1

# Resumed from its step-8 checkpoint on the same layout, the packed samples, masks and counted targets
# of steps 9-10 are the same: losses, learning rates and gradient norms bit for bit.
run ft4r 4 --checkpoint.load="$work/ck-ft4/step_00000008" --checkpoint.dir="$work/ck-ft4r"
grep -q "resumed from .*step_00000008 at step 8" "$work/ft4r.log" || { cat "$work/ft4r.log"; fail "no resume message"; }
steps() { grep -o '"step": [0-9]*, "loss": [^,]*, "lr": [^,]*, "grad_norm": [^,]*' "$1"; }
[ "$(steps "$work/ft4r.jsonl" | wc -l)" -eq 2 ] || fail "the resumed run logged $(steps "$work/ft4r.jsonl" | wc -l) steps, not 2"
diff <(steps "$work/ft4.jsonl" | tail -2) <(steps "$work/ft4r.jsonl") || fail "the resumed steps 9-10 differ from the uninterrupted run"
echo "resumed at step 8: steps 9-10 bit-identical"
fi

# Export the fine-tuned model with its tokenizer files, read it back, and compare validation losses on
# the answers (the loss mask's targets) before and after.
timeout 120 mpirun -np 2 "$consolidate" "$work/ck-ft4" --export-hf "$work/ft-hf" --tokenizer "hf:$work/l3" > "$work/export-ft.log" 2>&1 ||
  { cat "$work/export-ft.log"; fail "exporting the fine-tuned model"; }
run eval-ft 1 --checkpoint.init_from="hf:$work/ft-hf" --checkpoint.dir="$work/ck-eval-ft" --system.tensor_model_parallel_size=1 \
  --system.pipeline_model_parallel_size=1 --training.train_iters=1 --training.eval_interval=1 --optimizer.lr=1e-9 --optimizer.min_lr=1e-9
before=$(val_loss base) after=$(val_loss eval-ft)
echo "validation loss on the answers: before fine-tuning $before, after $after"
[ -n "$before" ] && [ -n "$after" ] || fail "no validation loss"
/usr/bin/python3 -c "import sys; sys.exit(0 if $after < $before - 1.0 else 1)" || fail "fine-tuning did not lower the answers' loss by a nat"
echo PASS
