// The byte tokenizer: token id = byte value, vocabulary 256, no files.
#pragma once
#include "tokenizer/tokenizer.hpp"

namespace dtrain {

class ByteTokenizer : public Tokenizer {
 public:
  ByteTokenizer() : Tokenizer("byte") {}
  std::vector<std::uint32_t> encode(const std::string& text) override;
  std::string decode(const std::vector<std::uint32_t>& ids) const override;
  int vocab_size() const override { return 256; }
};

}  // namespace dtrain
