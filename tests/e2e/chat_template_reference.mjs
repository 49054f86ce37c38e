// node chat_template_reference.mjs PACKAGE_DIR TOKENIZER_JSON RECORDS.json OUT: for each record, a list of
// [text, trained] segments written by hand from a chat template, the ids Hugging Face's tokenizers give
// (PACKAGE_DIR: the JavaScript @huggingface/tokenizers, or the Rust library's @anush008/tokenizers addon
// where PACKAGE_DIR holds its index.js; both split the tokenizer's added tokens out of the text) and the
// loss mask they imply (a segment's ids all trained or all not). A record that says "joint" is the
// template's whole text, encoded at once: a segment's ids are those the text up to its end has beyond
// the text before it, and each such prefix's ids must begin the whole text's (the segments' edges are
// token boundaries, so encoding by segments, as dtrain and NeMo do, tokenises the rendered conversation
// exactly as encoding the template's text does). Other records (prompt / completion pairs) encode each
// segment on its own. OUT: one line per record, "ids;mask" with space-separated values.
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
  if (record.joint) {
    // The whole text's ids; each segment's are those its end adds to the ids of the text before it.
    const whole = Array.from(await encode(record.segments.map(([text]) => text).join('')));
    let prefix = '';
    for (const [text, trained] of record.segments) {
      prefix += text;
      const upTo = Array.from(await encode(prefix));
      if (upTo.length < ids.length || upTo.join(' ') !== whole.slice(0, upTo.length).join(' ')) {
        console.error(`chat_template_reference: the ids up to the end of ${JSON.stringify(text)} are not a prefix of the whole text's:\n` +
                      `${upTo.join(' ')}\n${whole.join(' ')}`);
        process.exit(1);
      }
      mask.push(...upTo.slice(ids.length).map(() => (trained ? 1 : 0)));
      ids.push(...upTo.slice(ids.length));
    }
    if (ids.length !== whole.length) {
      console.error('chat_template_reference: the segments do not cover the whole text');
      process.exit(1);
    }
  } else {
    for (const [text, trained] of record.segments) {
      const piece = await encode(text);
      ids.push(...piece);
      mask.push(...Array.from(piece).map(() => (trained ? 1 : 0)));
    }
  }
  lines.push(ids.join(' ') + ';' + mask.join(' '));
}
fs.writeFileSync(out, lines.join('\n') + '\n');
console.log(`chat_template_reference: ${lines.length} records`);
