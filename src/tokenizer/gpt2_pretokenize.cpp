// gpt2_pretokenize and llama3_pretokenize: the text as classified characters, then the pattern's
// alternatives tried in order at each match start, exactly as a backtracking regex engine takes them.
#include "tokenizer/gpt2_pretokenize.hpp"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dtrain {
namespace {

enum class Class : std::uint8_t { letter, number, space, other };

struct Char {
  std::size_t begin;  // byte offset in the text
  UChar32 cp;         // the code point; U+FFFD for a byte that is not valid UTF-8
  Class cls;
};

// JavaScript's \s: WhiteSpace and LineTerminator of ECMA-262.
bool js_space(UChar32 c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

// Unicode's White_Space: \s of the Oniguruma patterns Hugging Face's Split pre-tokenizer runs.
bool unicode_space(UChar32 c) { return u_isUWhiteSpace(c); }

Class classify(UChar32 c, bool (*space)(UChar32)) {
  if (space(c)) return Class::space;
  const std::uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return Class::letter;
  if (mask & U_GC_N_MASK) return Class::number;
  return Class::other;
}

std::vector<Char> characters(std::string_view text, bool (*space)(UChar32)) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  const auto* s = reinterpret_cast<const std::uint8_t*>(text.data());
  const auto n = static_cast<std::int64_t>(text.size());
  std::int64_t i = 0;
  while (i < n) {
    const std::int64_t begin = i;
    UChar32 c = 0;
    U8_NEXT(s, i, n, c);
    if (c < 0) {
      c = 0xFFFD;
      i = begin + 1;  // one invalid byte per character
    }
    chars.push_back({static_cast<std::size_t>(begin), c, classify(c, space)});
  }
  return chars;
}

// The end (character index) of GPT-2's match that starts at character i.
std::size_t gpt2_match_end(const std::vector<Char>& chars, std::size_t i) {
  const std::size_t n = chars.size();
  const auto cp = [&](std::size_t k) { return k < n ? chars[k].cp : UChar32{-1}; };
  const auto run = [&](std::size_t k, Class c) {
    while (k < n && chars[k].cls == c) ++k;
    return k;
  };
  if (cp(i) == '\'') {  // 's 't 're 've 'm 'll 'd
    const UChar32 a = cp(i + 1), b = cp(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  if (cp(i) == ' ' && i + 1 < n && chars[i + 1].cls != Class::space) return run(i + 1, chars[i + 1].cls);  // ' ?X+'
  if (chars[i].cls != Class::space) return run(i, chars[i].cls);                                          // X+
  const std::size_t end = run(i, Class::space);
  if (end == n || end - i == 1) return end;  // \s+(?!\S) to the end of the text, or \s+ of one character
  return end - 1;                            // \s+(?!\S): leave the last space to the next piece
}

// The end of Llama 3's match at character i (kDigits = 3; Qwen's: 1):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,kDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
template <std::size_t kDigits>
std::size_t llama3_match_end(const std::vector<Char>& chars, std::size_t i) {
  const std::size_t n = chars.size();
  const auto cp = [&](std::size_t k) { return k < n ? chars[k].cp : UChar32{-1}; };
  const auto is = [&](std::size_t k, Class c) { return k < n && chars[k].cls == c; };
  const auto run = [&](std::size_t k, Class c) {
    while (k < n && chars[k].cls == c) ++k;
    return k;
  };
  const auto lower = [](UChar32 c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; };  // ASCII case folding
  const auto newline = [&](std::size_t k) { return cp(k) == '\r' || cp(k) == '\n'; };
  if (cp(i) == '\'') {
    const UChar32 a = lower(cp(i + 1)), b = lower(cp(i + 2));
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+: one character of neither kind (a space too) before letters, or letters.
  if (!newline(i) && !is(i, Class::letter) && !is(i, Class::number) && is(i + 1, Class::letter)) return run(i + 1, Class::letter);
  if (is(i, Class::letter)) return run(i, Class::letter);
  if (is(i, Class::number)) return std::min(run(i, Class::number), i + kDigits);  // \p{N}{1,kDigits}
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const std::size_t other = cp(i) == ' ' && is(i + 1, Class::other) ? i + 1 : i;
  if (is(other, Class::other)) {
    std::size_t end = run(other, Class::other);
    while (newline(end)) ++end;
    return end;
  }
  const std::size_t end = run(i, Class::space);  // chars[i] is a space: the rest begin with \s
  // \s*[\r\n]+: the whitespace up to its last line break, and that one.
  for (std::size_t k = end; k-- > i;)
    if (newline(k)) return k + 1;
  if (end == n || end - i == 1) return end;  // \s+(?!\S) to the end of the text, or \s+ of one character
  return end - 1;                            // \s+(?!\S): leave the last space to the next piece
}

void pretokenize(std::string_view text, bool (*space)(UChar32), std::size_t (*match_end)(const std::vector<Char>&, std::size_t),
                 const std::function<void(std::string_view)>& piece) {
  const std::vector<Char> chars = characters(text, space);
  for (std::size_t i = 0; i < chars.size();) {
    const std::size_t end = match_end(chars, i);
    const std::size_t from = chars[i].begin, to = end < chars.size() ? chars[end].begin : text.size();
    piece(text.substr(from, to - from));
    i = end;
  }
}

}  // namespace

void gpt2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece) {
  pretokenize(text, js_space, gpt2_match_end, piece);
}

void llama3_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece) {
  pretokenize(text, unicode_space, llama3_match_end<3>, piece);
}

void qwen2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece) {
  pretokenize(text, unicode_space, llama3_match_end<1>, piece);
}

}  // namespace dtrain
