#!/usr/bin/env bash
# Damaged tokenizer files given to dtrain-data: one 'dtrain-data: error:' line naming the file, exit 2,
# no token file written. The GPT-2 files are small ones written here with GPT-2's byte-to-unicode map
# (the 256 byte tokens, a few merges, <|endoftext|> last), so no download is needed.
#   tokenizer_files.sh CASE DTRAIN_DATA
#   gpt2_sound        the small files tokenise text (the check that the damaged ones are otherwise sound)
#   empty_merges      vocab.bpe of zero bytes
#   missing_entry     encoder.json without one token: the error names the id nobody has, not <|endoftext|>
#   sentencepiece_dir sentencepiece:DIR where DIR is a directory
#   hf_sound          hf:DIR with Hugging Face's tokenizer.json of the small files (hf_tokenizer_json.py) tokenises
#   hf_other_model    hf:DIR whose tokenizer.json holds a WordPiece model: refused, naming the file and the model
#   sp_sound          hf:DIR with a SentencePiece-style tokenizer.json (byte_fallback; the fuzz seed written from
#                     the format) tokenises
#   sp_missing_byte   ... whose vocabulary lacks the byte token <0x41>: refused naming it
#   sp_huge_id        ... with a token id of 9e8: refused naming the id, no table of that size allocated
#   sp_nfkc           ... with an NFKC normalizer: refused naming the step
set -u
case_name=$1 tool=$2
here=$(dirname "$0")
source "$here/lib.sh"
printf 'Call me Ishmael. Some years ago, never mind how long precisely.\n' > "$work/text.txt"
mkdir -p "$work/gpt2"
/usr/bin/python3 - "$work/gpt2" <<'PY' || fail "could not write the small GPT-2 files"
import json, sys
def bytes_to_unicode():  # GPT-2's encoder.py
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))
m = bytes_to_unicode()
tokens = [m[b] for b in range(256)]
merges = [(m[ord("C")], m[ord("a")]), (m[ord("l")], m[ord("l")]), (m[ord(" ")], m[ord("m")])]
tokens += [a + b for a, b in merges] + ["<|endoftext|>"]
json.dump({t: i for i, t in enumerate(tokens)}, open(sys.argv[1] + "/encoder.json", "w"))
open(sys.argv[1] + "/vocab.bpe", "w").write("#version: 0.2\n" + "".join("%s %s\n" % mb for mb in merges))
PY
spec="gpt2:$work/gpt2"
case $case_name in
  gpt2_sound)
    "$tool" --tokenizer "$spec" --out "$work/d" "$work/text.txt" > "$work/out.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$work/out.log"; fail "exit $rc"; }
    [ -s "$work/d.train.bin" ] || fail "no token file"
    echo PASS; exit 0 ;;
  empty_merges) : > "$work/gpt2/vocab.bpe"; file=$work/gpt2/vocab.bpe; expected="holds no merges" ;;
  missing_entry)
    /usr/bin/python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d.pop(next(k for k, v in d.items() if v == 100)); json.dump(d, open(p, 'w'))" \
      "$work/gpt2/encoder.json" || fail "python"
    file=$work/gpt2/encoder.json expected="no token has the id 100" ;;
  hf_sound | hf_other_model)
    /usr/bin/python3 "$here/hf_tokenizer_json.py" "$work/gpt2/encoder.json" "$work/gpt2/vocab.bpe" "$work/hf" > /dev/null || fail "tokenizer.json"
    spec="hf:$work/hf" file=$work/hf/tokenizer.json expected='its model is "WordPiece", not BPE'
    if [ "$case_name" = hf_sound ]; then
      "$tool" --tokenizer "$spec" --out "$work/d" "$work/text.txt" > "$work/out.log" 2>&1 || { cat "$work/out.log"; fail "hf:DIR"; }
      [ -s "$work/d.train.bin" ] || fail "no token file"
      echo PASS; exit 0
    fi
    /usr/bin/python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['model']['type']='WordPiece'; json.dump(d, open(p, 'w'))" \
      "$file" || fail "python" ;;
  sp_sound | sp_missing_byte | sp_huge_id | sp_nfkc)
    mkdir -p "$work/sp"
    cp "$here/../fuzz/corpus/tokenizer_json/seed-python-llama2-scheme" "$work/sp/tokenizer.json" || fail "copying the seed"
    spec="hf:$work/sp" file=$work/sp/tokenizer.json
    case $case_name in
      sp_sound)
        "$tool" --tokenizer "$spec" --out "$work/d" "$work/text.txt" > "$work/out.log" 2>&1 || { cat "$work/out.log"; fail "hf:DIR"; }
        [ -s "$work/d.train.bin" ] || fail "no token file"
        echo PASS; exit 0 ;;
      sp_missing_byte) edit='v = d["model"]["vocab"]; v["<0x41>x"] = v.pop("<0x41>")' expected='lacks the byte token <0x41> that byte_fallback needs' ;;
      sp_huge_id) edit='d["model"]["vocab"]["<0x41>"] = 900000000' expected='has the id 900000000, not one of 0\.\.' ;;
      sp_nfkc) edit='d["normalizer"] = {"type": "NFKC"}' expected='has the step {"type":"NFKC"}' ;;
    esac
    /usr/bin/python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); $edit; json.dump(d, open(p, 'w'))" "$file" || fail "python" ;;
  sentencepiece_dir) mkdir -p "$work/sp.model"; spec="sentencepiece:$work/sp.model" file=$work/sp.model expected="is a directory, not a file" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
timeout 30 "$tool" --tokenizer "$spec" --out "$work/d" "$work/text.txt" > "$work/out.log" 2>&1
rc=$?
cat "$work/out.log"
[ $rc -eq 2 ] || fail "exit $rc, expected 2"
[ "$(grep -c 'error:' "$work/out.log")" -eq 1 ] || fail "expected exactly one error line"
grep -q "error: .*'$file'.*$expected" "$work/out.log" || fail "the error does not name '$file' and say '$expected'"
grep -q "endoftext" "$work/out.log" && fail "the error blames <|endoftext|>"
ls "$work"/d.* > /dev/null 2>&1 && fail "a token file was written"
echo PASS
