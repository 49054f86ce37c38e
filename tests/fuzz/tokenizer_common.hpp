// What the tokenizer fuzz targets do with a tokenizer once its files load: encode a fixed text that
// exercises every pre-tokenisation class (letters, digits, contractions, punctuation, whitespace runs,
// non-Latin scripts, a long word), a decomposed accent that NFC composes and bytes that are not UTF-8,
// and decode it again, as dtrain-data and generate do.
#pragma once
#include "tokenizer/tokenizer.hpp"

namespace dtrain::fuzz {

inline void exercise_tokenizer(Tokenizer& tok) {
  static const std::string text =
      "Hello world! It's 2026: the quick brown fox's 12345 tokens.\n\n  \tIndented   spaces \xC3\xBC" "mlaut "
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E <|endoftext|> supercalifragilisticexpialidocioussupercalifragilistic cafe\xCC\x81 "
      "\xFF\xC3 \xE1\x84\x92\xE1\x85\xA1";
  const std::vector<std::uint32_t> ids = tok.encode(text);
  for (std::uint32_t id : ids)
    if (static_cast<int>(id) >= tok.vocab_size()) std::abort();  // encode's promise: ids below vocab_size()
  (void)tok.decode(ids);
  (void)tok.normalized(text);
  (void)tok.eod();
  (void)tok.token_id("<|endoftext|>");
  (void)tok.clone();
}

}  // namespace dtrain::fuzz
