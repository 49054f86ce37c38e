// node hf_tokenizer_reference.mjs PACKAGE_DIR TOKENIZER_JSON TEXT_FILE IDS_OUT: the ids that Hugging
// Face's JavaScript tokenizers (@huggingface/tokenizers: its own reading of tokenizer.json, its
// ByteLevel pre-tokenizer and BPE) give for the text, one per line, no special tokens added. The text
// goes in chunks of about 20 kB cut before a ' ' between two ASCII letters, where a match of GPT-2's
// pattern always ends and the next starts (as gpt2_reference.js argues), so the chunks' ids together
// are the whole text's.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [packageDir, tokenizerJson, textFile, idsOut] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(path.join(packageDir, 'dist', 'tokenizers.mjs')).href);
const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), {});
const text = fs.readFileSync(textFile, 'utf8');
const letter = (c) => /[A-Za-z]/.test(c);
const out = [];
let begin = 0;
while (begin < text.length) {
  let end = Math.min(begin + 20000, text.length);
  while (end < text.length && !(text[end] === ' ' && letter(text[end - 1]) && letter(text[end + 1]))) ++end;
  for (const id of tokenizer.encode(text.slice(begin, end), { add_special_tokens: false }).ids) out.push(id);
  begin = end;
}
fs.writeFileSync(idsOut, out.join('\n') + '\n');
console.log(`hf_tokenizer_reference: ${out.length} tokens from @huggingface/tokenizers`);
