// node tokenize_js.mjs PACKAGE_DIR TOKENIZER_JSON CORPUS.jsonl IDS_OUT REPEATS: Hugging Face's tokenizers on
// the "text" of every line of the corpus: the JavaScript @huggingface/tokenizers (its own reading of
// tokenizer.json), one document at a time as dtrain-data encodes them, or, where PACKAGE_DIR holds
// @anush008/tokenizers' index.js, the Rust library through its native addon, the documents in one
// encodeBatch call (one crossing into Rust; its threads capped at one by the caller's
// RAYON_NUM_THREADS=1 and taskset). Prints the best and median MB/s of the text over REPEATS runs as
// JSON, and writes the ids of the last run (a line of ids per document).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const [packageDir, tokenizerJson, corpus, idsOut, repeats] = process.argv.slice(2);
let encodeAll;
if (fs.existsSync(path.join(packageDir, 'index.js'))) {
  const { Tokenizer } = createRequire(import.meta.url)(path.join(packageDir, 'index.js'));
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  encodeAll = async (docs) => (await tokenizer.encodeBatch(docs, { addSpecialTokens: false })).map((e) => e.getIds());
} else {
  const { Tokenizer } = await import(pathToFileURL(path.join(packageDir, 'dist', 'tokenizers.mjs')).href);
  const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), {});
  encodeAll = async (docs) => docs.map((d) => tokenizer.encode(d, { add_special_tokens: false }).ids);
}
const docs = fs.readFileSync(corpus, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l).text);
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);
const rates = [];
let ids = [];
for (let r = 0; r < Number(repeats); ++r) {
  const t0 = process.hrtime.bigint();
  ids = await encodeAll(docs);
  rates.push(bytes / 1e6 / (Number(process.hrtime.bigint() - t0) / 1e9));
}
fs.writeFileSync(idsOut, ids.map((d) => d.join(' ')).join('\n') + '\n');
rates.sort((a, b) => a - b);
console.log(JSON.stringify({ mb_per_s_best: rates[rates.length - 1], mb_per_s_median: rates[Math.floor(rates.length / 2)], bytes, documents: docs.length }));
