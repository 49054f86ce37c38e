#!/usr/bin/python3
"""hf_tokenizer_json.py ENCODER_JSON VOCAB_BPE OUT_DIR: GPT-2's tokenizer as Hugging Face ships it,
written from GPT-2's own files: OUT_DIR/tokenizer.json (the structure of the gpt2 repository's file on
the Hub: a BPE model with the vocabulary and merges, ByteLevel pre-tokenizer, post-processor and
decoder, <|endoftext|> as an added special token), and OUT_DIR/vocab.json + merges.txt (the older
pair, the same contents as GPT-2's files)."""
import json
import os
import shutil
import sys

encoder_json, vocab_bpe, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
vocab = json.load(open(encoder_json, encoding="utf-8"))
lines = open(vocab_bpe, encoding="utf-8").read().split("\n")
merges = [l for l in lines[1:] if l.strip()] if lines[0].startswith("#version") else [l for l in lines if l.strip()]
byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
tokenizer = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": True, "special": True}],
    "normalizer": None, "pre_tokenizer": byte_level, "post_processor": dict(byte_level, trim_offsets=False),
    "decoder": byte_level,
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
              "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges},
}
json.dump(tokenizer, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
shutil.copy(encoder_json, os.path.join(out, "vocab.json"))
shutil.copy(vocab_bpe, os.path.join(out, "merges.txt"))
print("hf_tokenizer_json: %d tokens, %d merges" % (len(vocab), len(merges)))
