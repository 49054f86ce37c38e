// node llama3_tokenizer_json.mjs PACKAGE_DIR OUT_DIR TEXT_FILE IDS_OUT: Llama 3's tokenizer.json, in the
// structure of Meta's file on the Hugging Face Hub, written from the vocabulary and merges that the
// llama3-tokenizer-js package bakes in (a Split pre-tokenizer on Llama 3's pattern, then ByteLevel; a
// BPE model with ignore_merges; the 256 special tokens from id 128000 as added tokens), and the ids
// that package's own encoder gives for the text (no begin/end of text token), one per line.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [packageDir, outDir, textFile, idsOut] = process.argv.slice(2);
const mod = await import(pathToFileURL(path.join(packageDir, 'bundle', 'llama3-tokenizer-with-baked-data.js')).href);
const llama3 = mod.default;
const base = 128000;  // the BPE vocabulary; the special tokens follow it
const vocab = {};
for (let id = 0; id < base; ++id) vocab[llama3.vocabById[id]] = id;
const added = llama3.vocabById.slice(base).map((content, i) => ({
  id: base + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
const pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const tokenizer = {
  version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
  pre_tokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
  post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
           fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges: [...llama3.merges.keys()] },
};
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(tokenizer));
const ids = llama3.encode(fs.readFileSync(textFile, 'utf8'), { bos: false, eos: false });
fs.writeFileSync(idsOut, ids.join('\n') + '\n');
console.log(`llama3_tokenizer_json: ${Object.keys(vocab).length} + ${added.length} tokens, ${llama3.merges.size} merges; ${ids.length} ids from llama3-tokenizer-js`);
