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
#   compressed_members  the corpus as gzip, zstd, xz and bzip2, each also as three members, frames or streams
#               joined (and gzip with zero padding after it): the same datasets as the plain file
#   duplicate_keys  a key given twice takes its last value, as Python's json reads it
#   big_numbers a 30-digit integer and 1e999 in keys that are not read: the line is taken, as Python takes it
#   mask_split_missing  one split's loss mask deleted: dtrain refuses the data set on every rank naming it
#   megatron_mask_part_missing  a Megatron loss mask without its .idx: dtrain refuses it naming the mask
#   mask_is_directory  a loss mask path that is a directory: the error says so
#   bad_KIND    one bad input of each kind (malformed JSON, a missing key, a wrong type, invalid UTF-8, an
#               empty completion, an empty final answer after a good one, --sft with the byte tokenizer (no
#               end-of-document token), no record form, a byte order mark, a truncated .gz, a corrupt .zst,
#               a damaged second gzip member, other bytes after the gzip data, xz data named .jsonl, a zstd
#               frame made with --long=31, --json-keys with a text input or taking a file as a key, the same
#               file twice, the llama3 template with a tokenizer without its special tokens): exit 2, one
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

# small_bpe: $work/tok/tokenizer.json, a GPT-2-scheme byte-level BPE with <|endoftext|> (the fuzz corpus's),
# for fine-tuning records, which end with the end-of-document token the byte tokenizer lacks.
small_bpe() {
  mkdir -p "$work/tok" && cp "$src/tests/fuzz/corpus/tokenizer_json/seed-python-gpt2-scheme" "$work/tok/tokenizer.json"
}

# same_as_python JSONL PREFIX KEY...: the Megatron datasets PREFIX_KEY_document (byte tokenizer) hold each
# key's value as Python's json reads the lines (its UTF-8 bytes, a document a line).
same_as_python() {
  /usr/bin/python3 - "$@" <<'EOF' || fail "the datasets are not the values' bytes as Python reads them"
import json, struct, sys
import numpy as np
docs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
for key in sys.argv[3:]:
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
    same_as_python "$work/c.jsonl" "$work/o-c.jsonl/x" text title
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
  compressed_members)
    /usr/bin/python3 - "$work" <<'EOF'
import json, sys
for part in range(3):
    with open("%s/p%d.jsonl" % (sys.argv[1], part), "w") as f:
        for i in range(400):
            f.write(json.dumps({"text": "Part %d, document %d: caf\u00e9 " % (part, i) + "y" * (i % 23)}) + "\n")
EOF
    cat "$work"/p0.jsonl "$work"/p1.jsonl "$work"/p2.jsonl > "$work/c.jsonl"
    "$tool" --format megatron --out "$work/plain/x" "$work/c.jsonl" > /dev/null || fail "the plain corpus"
    for z in "gzip -c:gz" "zstd -q -c:zst" "xz -c:xz" "bzip2 -c:bz2"; do
      tool_cmd=${z%:*} ext=${z#*:}
      $tool_cmd "$work/c.jsonl" > "$work/one.jsonl.$ext"
      for p in 0 1 2; do $tool_cmd "$work/p$p.jsonl"; done > "$work/three.jsonl.$ext"
      for f in one three; do
        "$tool" --format megatron --out "$work/$f-$ext/x" "$work/$f.jsonl.$ext" > "$work/$f-$ext.log" || { cat "$work/$f-$ext.log"; fail "$f.jsonl.$ext"; }
        cmp "$work/plain/x_text_document.bin" "$work/$f-$ext/x_text_document.bin" || fail "$f.jsonl.$ext reads other documents than the plain file"
      done
      echo "$ext: one and three joined read as the plain file"
    done
    { cat "$work/one.jsonl.gz"; head -c 512 /dev/zero; } > "$work/padded.jsonl.gz"
    "$tool" --format megatron --out "$work/padded/x" "$work/padded.jsonl.gz" > /dev/null || fail "gzip data with zero padding after it"
    cmp "$work/plain/x_text_document.bin" "$work/padded/x_text_document.bin" || fail "the zero-padded gzip file reads other documents" ;;
  duplicate_keys)
    printf '{"text": "first value", "text": "last value"}\n{"title": "t", "text": "only"}\n' > "$work/d.jsonl"
    "$tool" --format megatron --out "$work/o/x" "$work/d.jsonl" > /dev/null || fail "dtrain-data"
    same_as_python "$work/d.jsonl" "$work/o/x" text ;;
  big_numbers)
    printf '{"text": "a", "id": 123456789012345678901234567890}\n{"text": "b", "score": 1e999, "w": -2.5e-400}\n' > "$work/n.jsonl"
    "$tool" --format megatron --out "$work/o/x" "$work/n.jsonl" > "$work/log" 2>&1 || { cat "$work/log"; fail "numbers Python reads were refused"; }
    same_as_python "$work/n.jsonl" "$work/o/x" text ;;
  mask_split_missing|megatron_mask_part_missing|mask_is_directory)
    small_bpe
    chat_records "$work/chat.jsonl" 300
    format=dtrain
    [ "$case_name" = megatron_mask_part_missing ] && format=megatron
    "$tool" --sft --tokenizer "hf:$work/tok" --format $format --out "$work/c" "$work/chat.jsonl" > /dev/null || fail "dtrain-data --sft"
    case $case_name in
      mask_split_missing) rm "$work/c.val.lossmask.bin"; expected="loss mask file '$work/c.val.lossmask.bin' is missing" ;;
      megatron_mask_part_missing) rm "$work/c.lossmask.idx"; expected="loss mask dataset '$work/c.lossmask' has .bin but no .idx" ;;
      mask_is_directory) rm "$work/c.train.lossmask.bin"; mkdir "$work/c.train.lossmask.bin"
        expected="cannot read loss mask file '$work/c.train.lossmask.bin' (Is a directory)" ;;
    esac
    exec "$here/expect_error.sh" 2 "$expected" "$dtrain" "$src/inputs/tiny.ini" --data.path="$work/c" --data.format=$format \
      --data.tokenizer="hf:$work/tok" --model.vocab_size=512 --model.seq_length=32 --system.pipeline_model_parallel_size=1 --checkpoint.dir= ;;
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
  bad_empty_completion) small_bpe; printf '{"prompt": "Q?", "completion": ""}\n' > "$work/i.jsonl"
    expect_error "line 1: \"completion\" is empty: nothing to train on (an empty completion)" --sft --tokenizer "hf:$work/tok" "$work/i.jsonl" ;;
  bad_whitespace_answer) small_bpe; printf '{"messages": [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "  \\n"}]}\n' > "$work/i.jsonl"
    expect_error "line 1: the assistant's content is only whitespace: nothing to train on" --sft --tokenizer "hf:$work/tok" "$work/i.jsonl" ;;
  bad_empty_final_answer) small_bpe
    printf '{"messages": [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A."}, {"role": "user", "content": "More?"}, {"role": "assistant", "content": ""}]}\n' > "$work/i.jsonl"
    expect_error "line 1: message 4 is an empty assistant answer: nothing to train on" --sft --tokenizer "hf:$work/tok" "$work/i.jsonl" ;;
  bad_sft_byte_tokenizer) printf '{"prompt": "Q?", "completion": "A."}\n' > "$work/i.jsonl"
    expect_error "--sft needs an end-of-document token, which the tokenizer (byte) lacks" --sft "$work/i.jsonl" ;;
  bad_no_record) small_bpe; printf '{"question": "Q?", "answer": "A"}\n' > "$work/i.jsonl"
    expect_error "line 1: the object has none of \"messages\", \"prompt\"/\"completion\", \"input\"/\"output\"" --sft --tokenizer "hf:$work/tok" "$work/i.jsonl" ;;
  bad_bom) printf '\xef\xbb\xbf{"text": "a"}\n' > "$work/i.jsonl"
    expect_error "line 1: the line starts with a UTF-8 byte order mark (bytes EF BB BF)" "$work/i.jsonl" ;;
  bad_damaged_member|bad_trailing_bytes)
    for i in $(seq 1 300); do echo "{\"text\": \"line $i of a corpus\"}"; done > "$work/a.jsonl"
    gzip -c "$work/a.jsonl" > "$work/a.gz"
    if [ "$case_name" = bad_damaged_member ]; then
      /usr/bin/python3 -c "
b = bytearray(open('$work/a.gz', 'rb').read()); b[0] ^= 0xff; open('$work/b.gz', 'wb').write(bytes(b))"
    else
      printf 'not gzip, a note someone appended\n' > "$work/b.gz"
    fi
    cat "$work/a.gz" "$work/b.gz" > "$work/i.jsonl.gz"
    expect_error "has gzip data followed by other bytes at offset $(stat -c %s "$work/a.gz")" "$work/i.jsonl.gz" ;;
  bad_corrupt_member) for i in $(seq 1 300); do echo "{\"text\": \"line $i of a corpus\"}"; done | gzip > "$work/a.gz"
    /usr/bin/python3 -c "
b = bytearray(open('$work/a.gz', 'rb').read()); b[len(b) // 2] ^= 0xff; open('$work/b.gz', 'wb').write(bytes(b))"
    cat "$work/a.gz" "$work/b.gz" > "$work/i.jsonl.gz"
    expect_error "holds corrupt gzip data" "$work/i.jsonl.gz" ;;
  bad_xz_named_plain) printf '{"text": "a"}\n' | xz > "$work/i.jsonl"
    expect_error "holds xz data, but its name does not end in .xz" "$work/i.jsonl" ;;
  bad_zstd_long_window) for i in $(seq 1 300); do echo "{\"text\": \"line $i\"}"; done | zstd -q --long=31 -c > "$work/i.jsonl.zst"
    expect_error "made with zstd --long=31), more than the 2^27 bytes dtrain-data decompresses with; decompress it first (zstd -d --long=31" "$work/i.jsonl.zst" ;;
  bad_json_keys_text) printf 'plain text\n' > "$work/i.txt"
    expect_error "--json-keys applies to JSON Lines inputs (.jsonl, .json), but '$work/i.txt' is read as text" "$work/i.txt" --json-keys text ;;
  bad_json_keys_take_file) printf '{"text": "a", "title": "b"}\n' > "$work/i.jsonl"
    "$tool" --format megatron --out "$work/ok/x" --json-keys text title -- "$work/i.jsonl" > /dev/null || fail "--json-keys ... -- FILE"
    expect_error "--json-keys took '$work/i.jsonl', a file, as a key" --json-keys text "$work/i.jsonl" ;;
  bad_same_file_twice) printf '{"text": "a"}\n' > "$work/i.jsonl"
    expect_error "the input '$work/./i.jsonl' is the same file as '$work/i.jsonl'" "$work/i.jsonl" "$work/./i.jsonl" ;;
  bad_truncated_gz) for i in $(seq 1 2000); do echo "{\"text\": \"line $i of a corpus\"}"; done | gzip > "$work/i.jsonl.gz"
    head -c 3000 "$work/i.jsonl.gz" > "$work/t.jsonl.gz"
    expect_error "holds truncated gzip data" "$work/t.jsonl.gz" ;;
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
