// node chat_template_reference.mjs PACKAGE_DIR TOKENIZER_JSON RECORDS.json OUT: for each record, a list of
// [text, trained] segments written by hand from a chat template, the ids Hugging Face's tokenizers give
// (PACKAGE_DIR: the JavaScript @huggingface/tokenizers, or the Rust library's @anush008/tokenizers addon
// where PACKAGE_DIR holds its index.js; both split the tokenizer's added tokens out of the text) and the
// loss mask they imply (a segment's ids all trained or all not). Where a record says "joint",
// the ids of its segments encoded one by one must equal those of its whole text at once: the segments'
// edges are pre-tokenisation boundaries, so encoding by segments (as dtrain and NeMo do) tokenises the
// rendered conversation exactly as encoding the template's text does. OUT: one line per record,
// "ids;mask" with space-separated values.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const [packageDir, tokenizerJson, recordsFile, out] = process.argv.slice(2);
let encode;
if (fs.existsSync(path.join(packageDir, 'index.js'))) {  // Hugging Face's Rust tokenizers
  const { Tokenizer } = createRequire(import.meta.url)(path.join(packageDir, 'index.js'));
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  encode = async (text) => (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
} else {
  const { Tokenizer } = await import(pathToFileURL(path.join(packageDir, 'dist', 'tokenizers.mjs')).href);
  const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), {});
  encode = async (text) => tokenizer.encode(text, { add_special_tokens: false }).ids;
}
const lines = [];
for (const record of JSON.parse(fs.readFileSync(recordsFile, 'utf8'))) {
  const ids = [], mask = [];
  for (const [text, trained] of record.segments) {
    const piece = await encode(text);
    ids.push(...piece);
    mask.push(...piece.map(() => (trained ? 1 : 0)));
  }
  if (record.joint) {
    const whole = await encode(record.segments.map(([text]) => text).join(''));
    if (whole.join(' ') !== ids.join(' ')) {
      console.error(`chat_template_reference: the segments' ids differ from the whole text's:\n${ids.join(' ')}\n${whole.join(' ')}`);
      process.exit(1);
    }
  }
  lines.push(ids.join(' ') + ';' + mask.join(' '));
}
fs.writeFileSync(out, lines.join('\n') + '\n');
console.log(`chat_template_reference: ${lines.length} records`);
