// GPT-2's byte-level BPE (the vocabulary of GPT-2 and GPT-3's r50k, and any Hugging Face tokenizer of
// the same scheme): the vocabulary maps each token's text (bytes written through GPT-2's byte-to-unicode
// map) to its id, the merges come by rank (tokenizer/bpe_files reads them from GPT-2's or Hugging
// Face's files). Encoding normalises the text where the tokenizer.json says so (NFC: Qwen), pre-tokenises
// it (gpt2_pretokenize, llama3_pretokenize for Llama 3's tokenizer.json, qwen2_pretokenize for Qwen's),
// then merges each piece's bytes by rank (with ignore_merges, a piece that is a token
// as a whole is that token), with a cache of the pieces seen; decoding concatenates the tokens' bytes.
#pragma once
#include <string>
#include <unordered_map>

#include "tokenizer/bpe_files.hpp"
#include "tokenizer/bpe_merge.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // Checks the vocabulary and the merges; a problem is a UserError naming the file.
  Gpt2Tokenizer(const ByteLevelBpeFiles& files, std::string identity);
  std::vector<std::uint32_t> encode(const std::string& text) override;
  std::string decode(const std::vector<std::uint32_t>& ids) const override;
  std::string normalized(const std::string& text) const override;
  int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
  std::optional<std::uint32_t> token_id(const std::string& text) const override;
  std::unique_ptr<Tokenizer> clone() const override { return std::unique_ptr<Tokenizer>(new Gpt2Tokenizer(*this)); }

 private:
  Gpt2Tokenizer(const Gpt2Tokenizer&) = default;
  void load_vocab(const ByteLevelBpeFiles& files);
  void load_merges(const ByteLevelBpeFiles& files);
  // The ids of one pre-tokenised piece.
  std::vector<std::uint32_t> bpe(std::string_view piece) const;

  std::vector<std::string> token_bytes_;                        // id -> the bytes it stands for
  std::uint32_t byte_id_[256] = {};                             // byte -> its one-byte token
  std::unordered_map<std::string, std::uint32_t> id_of_;        // token bytes -> id
  BpeMerges merges_;
  std::unordered_map<std::string, std::vector<std::uint32_t>> cache_;  // piece -> ids, at most kCachedPieces
  static constexpr std::size_t kCachedPieces = std::size_t{1} << 20;
  static constexpr std::size_t kLongestCachedPiece = 256;  // bytes: the cache holds at most 2^20 x 256 B of keys
  ByteLevelBpeFiles::Split split_ = ByteLevelBpeFiles::Split::gpt2;
  bool nfc_ = false, ignore_merges_ = false;
};

}  // namespace dtrain
