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
  std::optional<std::uint32_t> token_id(const std::string&) const override { return std::nullopt; }
  std::optional<std::uint32_t> eod() const override { return std::nullopt; }
  std::unique_ptr<Tokenizer> clone() const override { return std::make_unique<ByteTokenizer>(); }
};

}  // namespace dtrain
