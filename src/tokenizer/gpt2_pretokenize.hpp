// Byte-level BPE pre-tokenisation. GPT-2's: the text split into the pieces that the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches one after another, hand-written over UTF-8 (no regex engine). \p{L} and \p{N} are Unicode's
// letter and number categories (ICU), \s is JavaScript's whitespace (as in the gpt-3-encoder package).
// A byte that is not valid UTF-8 counts as one character outside the three classes, so the pieces
// always cover the text byte for byte.
#pragma once
#include <functional>
#include <string_view>

namespace dtrain {

// Calls `piece` with each piece of `text`, in order; their concatenation is `text`.
void gpt2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece);

// Llama 3's pre-tokenisation (the Split pre-tokenizer of its tokenizer.json):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with \s Unicode's White_Space (the Oniguruma semantics Hugging Face's tokenizers give it) and the
// contractions in either ASCII case.
void llama3_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece);

// Qwen's (Qwen2, 2.5, 3): Llama 3's pattern with single digits, \p{N} for \p{N}{1,3}.
void qwen2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece);

}  // namespace dtrain
