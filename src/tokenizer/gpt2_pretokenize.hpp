// GPT-2's pre-tokenisation: the text split into the pieces that the pattern
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

}  // namespace dtrain
