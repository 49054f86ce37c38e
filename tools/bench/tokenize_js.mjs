// node tokenize_js.mjs PACKAGE_DIR TOKENIZER_JSON CORPUS.jsonl IDS_OUT REPEATS: @huggingface/tokenizers (Hugging
// Face's JavaScript tokenizer, its own reading of tokenizer.json) on the "text" of every line of the
// corpus, one document at a time as dtrain-data encodes them; prints the best and median MB/s of the
// text over REPEATS runs as JSON, and writes the ids of the last run (a line of ids per document).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [packageDir, tokenizerJson, corpus, idsOut, repeats] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(path.join(packageDir, 'dist', 'tokenizers.mjs')).href);
const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), {});
const docs = fs.readFileSync(corpus, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l).text);
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);
const rates = [];
let ids = [];
for (let r = 0; r < Number(repeats); ++r) {
  ids = [];
  const t0 = process.hrtime.bigint();
  for (const d of docs) ids.push(tokenizer.encode(d, { add_special_tokens: false }).ids);
  rates.push(bytes / 1e6 / (Number(process.hrtime.bigint() - t0) / 1e9));
}
fs.writeFileSync(idsOut, ids.map((d) => d.join(' ')).join('\n') + '\n');
rates.sort((a, b) => a - b);
console.log(JSON.stringify({ mb_per_s_best: rates[rates.length - 1], mb_per_s_median: rates[Math.floor(rates.length / 2)], bytes, documents: docs.length }));
