// node hf_rust_tokenizer_reference.mjs PACKAGE_DIR TOKENIZER_JSON TEXT_FILE IDS_OUT [whole]: the ids that
// Hugging Face's Rust tokenizers library (the tokenizers crate, through the @anush008/tokenizers native
// addon: Tokenizer.fromFile, its own normalizers, pre-tokenizers and BPE) gives for the text, one per
// line, no special tokens added. The text goes in chunks (text_chunks.mjs says why their ids together are
// the whole text's; NFC never composes across a cut, a space between two ASCII letters), or with `whole`
// as one string: SentencePiece-style BPE may merge across spaces, so only the whole text is a reference.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { textChunks } from './text_chunks.mjs';

const [packageDir, tokenizerJson, textFile, idsOut, whole] = process.argv.slice(2);
const { Tokenizer } = createRequire(import.meta.url)(path.join(packageDir, 'index.js'));
const tokenizer = Tokenizer.fromFile(tokenizerJson);
const out = [];
const text = fs.readFileSync(textFile, 'utf8');
for (const chunk of whole === 'whole' ? [text] : textChunks(text)) {
  const encoding = await tokenizer.encode(chunk, null, { addSpecialTokens: false });
  for (const id of encoding.getIds()) out.push(id);
}
fs.writeFileSync(idsOut, out.join('\n') + '\n');
console.log(`hf_rust_tokenizer_reference: ${out.length} tokens from Hugging Face's Rust tokenizers`);
