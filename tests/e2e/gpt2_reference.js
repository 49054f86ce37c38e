// node gpt2_reference.js PACKAGE_DIR TEXT_FILE IDS_OUT: the ids that the gpt-3-encoder package's own
// encode() gives for the text, one per line. encode() concatenates arrays quadratically, so the text
// goes in chunks of about 20 kB cut before a ' ' that sits between two ASCII letters: there a match of
// the pre-tokenisation pattern always ends (letter runs stop at the space) and the next one starts
// (' ?\p{L}+'), and the pattern never looks behind, so the chunks' ids together are the whole text's.
const fs = require('fs');
const { encode } = require(process.argv[2]);
const text = fs.readFileSync(process.argv[3], 'utf8');
const letter = (c) => /[A-Za-z]/.test(c);
const out = [];
let begin = 0;
while (begin < text.length) {
  let end = Math.min(begin + 20000, text.length);
  while (end < text.length && !(text[end] === ' ' && letter(text[end - 1]) && letter(text[end + 1]))) ++end;
  for (const id of encode(text.slice(begin, end))) out.push(id);
  begin = end;
}
fs.writeFileSync(process.argv[4], out.join('\n') + '\n');
console.log(`gpt2_reference: ${out.length} tokens from gpt-3-encoder`);
