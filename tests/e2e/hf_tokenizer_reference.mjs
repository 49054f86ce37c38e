// node hf_tokenizer_reference.mjs PACKAGE_DIR TOKENIZER_JSON TEXT_FILE IDS_OUT: the ids that Hugging
// Face's JavaScript tokenizers (@huggingface/tokenizers: its own reading of tokenizer.json, its
// pre-tokenizers and BPE) give for the text, one per line, no special tokens added. The text goes in
// chunks (text_chunks.mjs says why their ids together are the whole text's).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { textChunks } from './text_chunks.mjs';

const [packageDir, tokenizerJson, textFile, idsOut] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(path.join(packageDir, 'dist', 'tokenizers.mjs')).href);
const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), {});
const out = [];
for (const chunk of textChunks(fs.readFileSync(textFile, 'utf8')))
  for (const id of tokenizer.encode(chunk, { add_special_tokens: false }).ids) out.push(id);
fs.writeFileSync(idsOut, out.join('\n') + '\n');
console.log(`hf_tokenizer_reference: ${out.length} tokens from @huggingface/tokenizers`);
