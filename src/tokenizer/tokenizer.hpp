// The tokenizer interface (text <-> token ids) and its factory from a data.tokenizer value:
//   byte                  each byte is a token (vocabulary 256)
//   gpt2[:DIR]            GPT-2's byte-level BPE from DIR/encoder.json and DIR/vocab.bpe
//                         (default DIR data/tokenizers/gpt2, fetched by tools/fetch-data)
//   hf:DIR                Hugging Face's DIR/tokenizer.json (byte-level BPE, GPT-2's, Llama 3's or Qwen's
//                         pre-tokenizer; or SentencePiece-style BPE with byte fallback: Llama 2, Mistral,
//                         Gemma), else DIR/vocab.json and DIR/merges.txt
//   sentencepiece:MODEL   a SentencePiece model file (dtrain-data --train-tokenizer makes one)
// A tokenizer's identity names its kind and the hash of its files ("byte", "gpt2@<16 hex digits>");
// token files, checkpoints and model-final.h5 store it, and dtrain refuses to mix identities.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<std::uint32_t> encode(const std::string& text) = 0;
  // Text that goes on from text encoded just before it, with nothing between them (a chat template's
  // runs): without what a tokenizer puts at the start of a text (Llama 2's and Mistral's "▁").
  virtual std::vector<std::uint32_t> encode_continuation(const std::string& text) { return encode(text); }
  // Throws UserError for an id outside the vocabulary.
  virtual std::string decode(const std::vector<std::uint32_t>& ids) const = 0;
  // The text encode tokenises, after the tokenizer's normalizer (NFC for Qwen's tokenizer.json; the text
  // itself for the others): decode(encode(text)) gives it back.
  virtual std::string normalized(const std::string& text) const { return text; }
  // Every id encode returns is below it.
  virtual int vocab_size() const = 0;
  // The id of the vocabulary entry that is exactly `text` (a special token such as "<|eot_id|>" or
  // "<|endoftext|>"; encode never produces them from text), if the vocabulary has one.
  virtual std::optional<std::uint32_t> token_id(const std::string& text) const = 0;
  // The end-of-document token (Megatron's eod): the first of "<|endoftext|>" (GPT-2), "<|end_of_text|>"
  // (Llama 3), "<eos>" (Gemma, whose "</s>" is an HTML tag) and "</s>" (Llama 2, Mistral) in the vocabulary, or a SentencePiece model's end-of-sentence id; none for the
  // byte tokenizer, whose 256 ids are all bytes.
  virtual std::optional<std::uint32_t> eod() const;
  // An independent copy for another thread (encode keeps a cache of pieces).
  virtual std::unique_ptr<Tokenizer> clone() const = 0;
  const std::string& identity() const { return identity_; }

 protected:
  explicit Tokenizer(std::string identity) : identity_(std::move(identity)) {}
  Tokenizer(const Tokenizer&) = default;

 private:
  std::string identity_;
};

// Loads the tokenizer `spec` names; an unknown spec or an unreadable or malformed file is a UserError
// naming it.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);
// The files data.tokenizer=`spec` reads, which its identity hashes (none for byte); UserError for an
// unknown spec.
std::vector<std::string> tokenizer_files(const std::string& spec);
// UserError unless the tokenizer's vocabulary fits model.vocab_size (`vocab_size`); `what` names the
// model ("weights file 'PATH'", "the run").
void check_vocab_fits(const Tokenizer& tokenizer, int vocab_size, const std::string& what);
// UserError unless `made_with` (the identity stored in `what`, e.g. "token file 'PATH'") is `identity`,
// the identity of data.tokenizer=`spec` (loaded once, by one rank, and passed on).
void check_made_with(const std::string& spec, const std::string& identity, const std::string& made_with, const std::string& what);

}  // namespace dtrain
