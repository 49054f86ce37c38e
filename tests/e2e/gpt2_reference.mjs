// node gpt2_reference.mjs PACKAGE_DIR TEXT_FILE IDS_OUT: the ids that the gpt-3-encoder package's own
// encode() gives for the text, one per line. encode() concatenates arrays quadratically, so the text
// goes in chunks (text_chunks.mjs says why their ids together are the whole text's).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { textChunks } from './text_chunks.mjs';

const [packageDir, textFile, idsOut] = process.argv.slice(2);
const { encode } = createRequire(import.meta.url)(packageDir);
const out = [];
for (const chunk of textChunks(fs.readFileSync(textFile, 'utf8'))) for (const id of encode(chunk)) out.push(id);
fs.writeFileSync(idsOut, out.join('\n') + '\n');
console.log(`gpt2_reference: ${out.length} tokens from gpt-3-encoder`);
