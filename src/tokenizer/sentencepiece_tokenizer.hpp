// SentencePiece through Debian's libsentencepiece: a tokenizer from a .model file, and training one
// that round-trips text exactly (identity normalisation, whitespace kept, byte fallback).
#pragma once
#include <memory>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace dtrain {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Loads the model; an unreadable or invalid file is a UserError naming it.
  SentencePieceTokenizer(const std::string& model_path, std::string identity);
  ~SentencePieceTokenizer() override;
  std::vector<std::uint32_t> encode(const std::string& text) override;
  std::string decode(const std::vector<std::uint32_t>& ids) const override;
  int vocab_size() const override;
  std::optional<std::uint32_t> token_id(const std::string& text) const override;
  std::optional<std::uint32_t> eod() const override;
  std::unique_ptr<Tokenizer> clone() const override { return std::make_unique<SentencePieceTokenizer>(path_, identity()); }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
};

// Trains a unigram model of `vocab_size` pieces on the lines of `text` and writes it to
// `prefix`.model (and the readable `prefix`.vocab). UserError if SentencePiece refuses.
void train_sentencepiece(const std::string& text, int vocab_size, const std::string& prefix);

}  // namespace dtrain
