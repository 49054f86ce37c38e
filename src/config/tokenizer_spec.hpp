// The grammar of data.tokenizer (and dtrain-data --tokenizer): byte | gpt2[:DIR] | hf:DIR | sentencepiece:MODEL.
// src/tokenizer loads what it names; this is only the value's syntax, checked with the other keys.
#pragma once
#include <string>

namespace dtrain {

enum class TokenizerKind { byte, gpt2, hf, sentencepiece };
const char* tokenizer_name(TokenizerKind kind);  // "byte", "gpt2", "hf", "sentencepiece": as written and as identities begin

struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::byte;
  std::string arg;  // gpt2: the directory of encoder.json and vocab.bpe; hf: of tokenizer.json (or vocab.json and
                    // merges.txt); sentencepiece: the .model file
};

constexpr const char* kGpt2DefaultDir = "data/tokenizers/gpt2";  // where tools/fetch-data puts GPT-2's files

// UserError naming the accepted forms for anything else.
TokenizerSpec parse_tokenizer_spec(const std::string& value);

}  // namespace dtrain
