// The text in chunks of about 20 kB, each cut before a ' ' that sits between two ASCII letters, for the
// JavaScript reference encoders (gpt2_reference.mjs, hf_tokenizer_reference.mjs) whose encode() slows
// down on long texts. At such a cut a match of GPT-2's and Llama 3's pre-tokenisation patterns always
// ends (letter runs stop at the space) and the next one starts (' ?\p{L}+', or Llama 3's
// '[^\r\n\p{L}\p{N}]?\p{L}+'), and neither pattern looks behind, so the chunks' ids together are the
// whole text's.
export function* textChunks(text) {
  const letter = (c) => /[A-Za-z]/.test(c);
  let begin = 0;
  while (begin < text.length) {
    let end = Math.min(begin + 20000, text.length);
    while (end < text.length && !(text[end] === ' ' && letter(text[end - 1]) && letter(text[end + 1]))) ++end;
    yield text.slice(begin, end);
    begin = end;
  }
}
