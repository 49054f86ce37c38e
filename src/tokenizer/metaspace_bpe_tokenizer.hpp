// SentencePiece-style BPE from a Hugging Face tokenizer.json (Llama 2, Mistral, Gemma, and other
// SentencePiece models converted by transformers): tokens are text with U+2581 "▁" for a space, a
// character outside the vocabulary falls back to its UTF-8 bytes as the tokens <0x00>..<0xFF>
// (byte_fallback), and merges come by rank. The pipeline is the one the library runs:
//   1. added tokens that are not special are found in the raw text first (added_tokens.hpp);
//   2. each stretch between them is normalised: Replace " " -> "▁", with Prepend "▁" (Llama 2,
//      Mistral) or without (Gemma), or the Metaspace pre-tokenizer's replacement and prepend_scheme;
//   3. split into words (Metaspace's split before each "▁", or a Split on " " after the previous
//      piece; Gemma's finds no spaces left, so each stretch is one word);
//   4. each word's characters (bytes where the vocabulary lacks the character) merged by rank.
// Decoding inverts 2-4 as the tokenizer.json decoders (Replace "▁" -> " ", ByteFallback, Fuse, Strip
// one leading space; or Metaspace's) do, keeping bytes that do not form UTF-8 as they are.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe_merge.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {

class MetaspaceBpeTokenizer : public Tokenizer {
 public:
  // From a parsed tokenizer.json (`path` names it in errors): UserError naming what dtrain does not
  // implement or what is malformed.
  MetaspaceBpeTokenizer(const nlohmann::json& parsed, const std::string& path, std::string identity);
  std::vector<std::uint32_t> encode(const std::string& text) override;
  std::vector<std::uint32_t> encode_continuation(const std::string& text) override;
  std::string decode(const std::vector<std::uint32_t>& ids) const override;
  std::string normalized(const std::string& text) const override;
  int vocab_size() const override { return static_cast<int>(text_of_.size()); }
  std::optional<std::uint32_t> token_id(const std::string& text) const override;
  std::unique_ptr<Tokenizer> clone() const override { return std::unique_ptr<Tokenizer>(new MetaspaceBpeTokenizer(*this)); }

 private:
  MetaspaceBpeTokenizer(const MetaspaceBpeTokenizer&) = default;
  enum class Prefix { none, always, unless_there };  // "▁" before a stretch: Prepend; Metaspace's scheme
  enum class Split { none, before_metaspace, after_space };
  // The stretch as the BPE sees it (steps 2): `starts_text` for Metaspace's "first" scheme,
  // `continues` for text that goes on from earlier text of the same stretch (no prefix then).
  std::string normalize(std::string_view stretch, bool starts_text, bool continues) const;
  void encode_text(const std::string& text, bool continues, std::vector<std::uint32_t>& ids) const;
  void encode_word(std::string_view word, std::vector<std::uint32_t>& ids) const;

  std::vector<std::string> text_of_;                      // id -> the token's text as decoded ("▁" as " ", bytes raw)
  std::unordered_map<std::string, std::uint32_t> id_of_;  // vocabulary and added text ("▁" kept) -> id
  std::vector<char> in_model_;                            // id -> in the BPE model's vocabulary (not only added)
  std::uint32_t ascii_id_[128] = {};                      // an ASCII character's token; kNone if none
  std::unordered_map<char32_t, std::uint32_t> char_id_;   // another character's token, if the model has one
  std::uint32_t byte_id_[256] = {};                       // <0xXX>
  BpeMerges merges_;
  AddedTokenMatcher added_;
  Prefix prefix_ = Prefix::none;
  bool prefix_only_at_start_ = false;  // Metaspace's prepend_scheme "first"
  bool replace_spaces_ = false;
  Split split_ = Split::none;
  bool ignore_merges_ = false;
  bool strip_leading_space_ = false;  // the decoder strips one leading space
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
};

}  // namespace dtrain
