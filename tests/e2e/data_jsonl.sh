#!/usr/bin/env bash
# dtrain-data on JSON Lines corpora and fine-tuning records, as a user runs it.
#   data_jsonl.sh CASE DTRAIN_DATA SOURCE_DIR [DTRAIN]
#   formats     a corpus with two --json-keys, plain, gzip and zstd: the same two Megatron datasets
#               (PREFIX_KEY_document, Megatron's naming) from each, whose documents are the values'
#               UTF-8 bytes in file order as Python's json reads them (byte tokenizer); --append-eod with
#               GPT-2 ends each with <|endoftext|> (50256)
#   workers     Moby Dick's paragraphs as JSON Lines with GPT-2's tokenizer, and fine-tuning records:
#               --workers 1 and 4 write the same bytes, token files and loss masks alike
#   skip        --skip-bad-lines counts the bad lines, names the first, and writes the good ones
#   truncate    --sft --seq-length refuses an over-long record, naming its line; --truncate cuts it to
#               seq_length + 1 tokens ending with the end-of-document token
#   mask_mismatch  a loss mask beside tokens it was not made for: dtrain stops on every rank (exit 2)
#               naming both files
#   bad_KIND    one bad line of each kind (malformed JSON, a missing key, a wrong type, invalid UTF-8, an
#               empty completion, no record form, a truncated .gz, a corrupt .zst, the llama3 template with a
#               tokenizer without its special tokens): exit 2, one
#               'dtrain-data: error:' line naming the file and line (or the damage), and no output file
set -u
case_name=$1 tool=$2 src=$3 dtrain=${4:-}
here=$(dirname "$0")
source "$here/lib.sh"
gpt2_dir=$src/data/tokenizers/gpt2

# expect_error EXPECTED ARGS...: exit 2, one error line containing EXPECTED, nothing under $work/out.
expect_error() {
  local expected=$1
  shift
  "$tool" --out "$work/out/x" "$@" > "$work/stdout" 2> "$work/stderr"
  local rc=$?
  cat "$work/stdout" "$work/stderr"
  [ "$rc" -eq 2 ] || fail "exit code $rc, want 2"
  [ "$(grep -c '^dtrain-data: error: ' "$work/stderr")" -eq 1 ] || fail "not one 'dtrain-data: error:' line"
  grep -qF -- "$expected" "$work/stderr" || fail "the error does not say '$expected'"
  [ -z "$(ls -A "$work/out" 2>/dev/null)" ] || fail "output left behind: $(ls "$work/out")"
}

chat_records() {  # chat_records FILE N: N fine-tuning records of the three forms
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        if i % 3 == 0:
            r = {"messages": [{"role": "user", "content": "Question %d: what is %d squared?" % (i, i)},
                              {"role": "assistant", "content": "It is %d." % (i * i)}]}
        elif i % 3 == 1:
            r = {"prompt": "Say %d twice:" % i, "completion": " %d %d" % (i, i)}
        else:
            r = {"input": "caf\u00e9 n\u00b0%d" % i, "output": "ok \u2713"}
        f.write(json.dumps(r) + "\n")
EOF
}

case $case_name in
  formats)
    /usr/bin/python3 - "$work/c.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(300):
        f.write(json.dumps({"text": "Document %d: caf\u00e9 \u2603 " % i + "x" * (i % 17), "title": "T%d" % i, "n": i}) + "\n")
        if i == 100: f.write("\n")  # a blank line separates nothing
EOF
    gzip -k "$work/c.jsonl" && zstd -q "$work/c.jsonl" -o "$work/c.jsonl.zst" || fail "compressing"
    for f in c.jsonl c.jsonl.gz c.jsonl.zst; do
      "$tool" --format megatron --json-keys text title --out "$work/o-$f/x" "$work/$f" > "$work/$f.log" || { cat "$work/$f.log"; fail "$f"; }
    done
    for k in text title; do
      for e in bin idx; do
        cmp "$work/o-c.jsonl/x_${k}_document.$e" "$work/o-c.jsonl.gz/x_${k}_document.$e" &&
          cmp "$work/o-c.jsonl/x_${k}_document.$e" "$work/o-c.jsonl.zst/x_${k}_document.$e" || fail "$k .$e differs between plain and compressed input"
      done
    done
    /usr/bin/python3 - "$work/c.jsonl" "$work/o-c.jsonl/x" <<'EOF' || fail "the datasets are not the values' bytes"
import json, struct, sys
import numpy as np
docs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
for key in ("text", "title"):
    p = "%s_%s_document" % (sys.argv[2], key)
    idx = open(p + ".idx", "rb").read()
    (n,) = struct.unpack("<Q", idx[18:26])
    lengths = np.frombuffer(idx[34:34 + 4 * n], dtype=np.int32)
    tokens = np.fromfile(p + ".bin", dtype=np.uint16)
    want = [list(d[key].encode("utf-8")) for d in docs]
    got, at = [], 0
    for l in lengths:
        got.append(tokens[at:at + l].tolist())
        at += l
    assert got == want, key
    print("%s: %d documents, the values' UTF-8 bytes" % (key, len(got)))
EOF
    need_fetched "$src"
    "$tool" --format megatron --tokenizer "gpt2:$gpt2_dir" --append-eod --out "$work/eod/x" "$work/c.jsonl.zst" > /dev/null || fail "--append-eod"
    /usr/bin/python3 - "$work/eod/x_text_document" <<'EOF' || fail "a document does not end with <|endoftext|>"
import struct, sys
import numpy as np
idx = open(sys.argv[1] + ".idx", "rb").read()
(n,) = struct.unpack("<Q", idx[18:26])
lengths = np.frombuffer(idx[34:34 + 4 * n], dtype=np.int32)
tokens = np.fromfile(sys.argv[1] + ".bin", dtype=np.uint16)
ends = np.cumsum(lengths) - 1
assert n == 300 and (tokens[ends] == 50256).all() and (tokens == 50256).sum() == 300
print("--append-eod: each of the %d documents ends with 50256" % n)
EOF
    ;;
  workers)
    need_fetched "$src"
    /usr/bin/python3 - "$src/data/raw/moby-dick.txt" "$work/moby.jsonl" <<'EOF'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
with open(sys.argv[2], "w") as f:
    for p in text.split("\n\n"):
        if p.strip(): f.write(json.dumps({"text": p}) + "\n")
EOF
    chat_records "$work/chat.jsonl" 3000
    for w in 1 4; do
      "$tool" --tokenizer "gpt2:$gpt2_dir" --workers $w --append-eod --out "$work/w$w/moby" "$work/moby.jsonl" > "$work/w$w.log" ||
        { cat "$work/w$w.log"; fail "--workers $w"; }
      "$tool" --tokenizer "gpt2:$gpt2_dir" --workers $w --sft --format megatron --out "$work/w$w/chat" "$work/chat.jsonl" > "$work/s$w.log" ||
        { cat "$work/s$w.log"; fail "--sft --workers $w"; }
      grep "dtrain-data: read" "$work/w$w.log"
    done
    for f in moby_text_document.train.bin moby_text_document.val.bin chat.bin chat.idx chat.lossmask.bin chat.lossmask.idx; do
      cmp "$work/w1/$f" "$work/w4/$f" || fail "$f differs between 1 and 4 workers"
    done
    echo "1 and 4 workers: the same bytes in every output" ;;
  skip)
    printf '{"text": "a"}\n{"text": 5}\n{"text": "b"}\nnot json\n{"txt": "c"}\n{"text": "d"}\n' > "$work/b.jsonl"
    "$tool" --skip-bad-lines --format megatron --out "$work/s/x" "$work/b.jsonl" > "$work/log" || { cat "$work/log"; fail "--skip-bad-lines"; }
    cat "$work/log"
    grep -q "skipped 3 bad line(s) (--skip-bad-lines); the first: $work/b.jsonl:2: \"text\" is a number, not a string" "$work/log" ||
      fail "the skipped lines are not reported"
    grep -q "(3 tokens in 3 documents" "$work/log" || fail "the good lines were not written" ;;
  truncate)
    need_fetched "$src"
    /usr/bin/python3 -c "
import json
print(json.dumps({'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'ok'}]}))
print(json.dumps({'messages': [{'role': 'user', 'content': 'a few words'}, {'role': 'assistant', 'content': ' '.join(['word'] * 200)}]}))" > "$work/t.jsonl"
    expect_error "input file '$work/t.jsonl', line 2: the record renders to 212 tokens, more than the 65 a sample of --seq-length holds; shorten it, or pass --truncate" \
      --sft --tokenizer "gpt2:$gpt2_dir" --seq-length 64 "$work/t.jsonl"
    "$tool" --sft --tokenizer "gpt2:$gpt2_dir" --seq-length 64 --truncate --format megatron --out "$work/t/x" "$work/t.jsonl" > "$work/log" ||
      { cat "$work/log"; fail "--truncate"; }
    grep -q "1 record(s) truncated to --seq-length + 1 tokens" "$work/log" || { cat "$work/log"; fail "no truncation reported"; }
    /usr/bin/python3 - "$work/t/x" <<'EOF' || fail "the truncated record is not 65 tokens ending with <|endoftext|>"
import struct, sys
import numpy as np
idx = open(sys.argv[1] + ".idx", "rb").read()
lengths = np.frombuffer(idx[34:34 + 8], dtype=np.int32)
tokens = np.fromfile(sys.argv[1] + ".bin", dtype=np.uint16)
assert lengths[1] == 65 and tokens[-1] == 50256, (lengths, tokens[-3:])
print("truncated to", lengths[1], "tokens")
EOF
    ;;
  mask_mismatch)
    need_fetched "$src"
    chat_records "$work/a.jsonl" 400
    chat_records "$work/b.jsonl" 401
    "$tool" --sft --tokenizer "gpt2:$gpt2_dir" --out "$work/a" "$work/a.jsonl" > /dev/null && "$tool" --sft --tokenizer "gpt2:$gpt2_dir" --out "$work/b" "$work/b.jsonl" > /dev/null ||
      fail "dtrain-data"
    cp "$work/b.train.lossmask.bin" "$work/a.train.lossmask.bin"
    exec "$here/expect_error.sh" 2 "loss mask file '$work/a.train.lossmask.bin' masks" "$dtrain" "$src/inputs/tiny.ini" --data.path="$work/a" \
      --data.tokenizer="gpt2:$gpt2_dir" --model.vocab_size=50304 --model.seq_length=32 --system.pipeline_model_parallel_size=1 --checkpoint.dir= ;;
  bad_json) printf '{"text": "a"}\n{"text": "b"\n' > "$work/i.jsonl"
    expect_error "input file '$work/i.jsonl', line 2: the line is not valid JSON" "$work/i.jsonl" ;;
  bad_missing_key) printf '{"text": "a"}\n{"body": "b"}\n' > "$work/i.jsonl"
    expect_error "line 2: the object has no key \"text\" (see --json-keys)" "$work/i.jsonl" ;;
  bad_wrong_type) printf '{"text": ["a"]}\n' > "$work/i.jsonl"
    expect_error "line 1: \"text\" is an array, not a string" "$work/i.jsonl" ;;
  bad_utf8) printf '{"text": "ok"}\n{"text": "caf\xe9"}\n' > "$work/i.jsonl"
    expect_error "line 2: the line is not valid UTF-8" "$work/i.jsonl" ;;
  bad_empty_completion) printf '{"prompt": "Q?", "completion": ""}\n' > "$work/i.jsonl"
    expect_error "line 1: \"completion\" is empty: nothing to train on (an empty completion)" --sft "$work/i.jsonl" ;;
  bad_whitespace_answer) printf '{"messages": [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "  \\n"}]}\n' > "$work/i.jsonl"
    expect_error "line 1: the assistant's content is only whitespace: nothing to train on" --sft "$work/i.jsonl" ;;
  bad_no_record) printf '{"question": "Q?", "answer": "A"}\n' > "$work/i.jsonl"
    expect_error "line 1: the object has none of \"messages\", \"prompt\"/\"completion\", \"input\"/\"output\"" --sft "$work/i.jsonl" ;;
  bad_truncated_gz) for i in $(seq 1 2000); do echo "{\"text\": \"line $i of a corpus\"}"; done | gzip > "$work/i.jsonl.gz"
    head -c 3000 "$work/i.jsonl.gz" > "$work/t.jsonl.gz"
    expect_error "holds corrupt or truncated gzip data" "$work/t.jsonl.gz" ;;
  bad_corrupt_zst) for i in $(seq 1 2000); do echo "{\"text\": \"line $i of a corpus\"}"; done | zstd -q > "$work/i.jsonl.zst"
    /usr/bin/python3 -c "
b = bytearray(open('$work/i.jsonl.zst', 'rb').read()); b[len(b) // 2] ^= 0xff; open('$work/c.jsonl.zst', 'wb').write(b)"
    expect_error "holds corrupt zstd data" "$work/c.jsonl.zst" ;;
  bad_template_tokens) need_fetched "$src"
    printf '{"prompt": "Q?", "completion": "A."}\n' > "$work/i.jsonl"
    expect_error "--chat-template llama3 needs the tokens <|begin_of_text|>" --sft --chat-template llama3 --tokenizer "gpt2:$gpt2_dir" "$work/i.jsonl" ;;
  *) fail "unknown case $case_name" ;;
esac
echo PASS
