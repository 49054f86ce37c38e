// SentencePieceTokenizer and train_sentencepiece over the library's processor and trainer (the trained
// model's files written by dtrain, staged and published).
#include "tokenizer/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "common/error.hpp"
#include "common/staged_file.hpp"

namespace dtrain {
namespace {

// The text's lines, one SentencePiece "sentence" each (newlines are left to byte fallback).
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& text) : text_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    done_ = pos_ >= text_.size();
    if (done_) return;
    const std::size_t end = std::min(text_.find('\n', pos_), text_.size());
    line_.assign(text_, pos_, end - pos_);
    pos_ = end + 1;
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::string& text_;
  std::size_t pos_ = 0;
  std::string line_;
  bool done_ = false;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path, std::string identity)
    : Tokenizer(std::move(identity)), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), path_(model_path) {
  sentencepiece::util::Status status;
  try {
    status = sp_->Load(model_path);
  } catch (const std::exception& e) {
    // libsentencepiece's own checks return a status, but its trie builder (darts_clone) throws: a model
    // with an empty piece made dtrain end with an internal error (found by fuzzing the model loader).
    throw UserError("cannot load the SentencePiece model '" + model_path + "' (" + e.what() +
                    "); make one with dtrain-data --train-tokenizer sentencepiece");
  }
  if (!status.ok())
    throw UserError("cannot load the SentencePiece model '" + model_path + "' (" + status.ToString() +
                    "); make one with dtrain-data --train-tokenizer sentencepiece");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::optional<std::uint32_t> SentencePieceTokenizer::token_id(const std::string& text) const {
  const int id = sp_->PieceToId(text);
  if (id < 0 || id >= vocab_size() || sp_->IdToPiece(id) != text) return std::nullopt;  // PieceToId gives unk for unknown pieces
  return static_cast<std::uint32_t>(id);
}

std::optional<std::uint32_t> SentencePieceTokenizer::eod() const {
  const int id = sp_->eos_id();
  if (id < 0 || id >= vocab_size()) return std::nullopt;
  return static_cast<std::uint32_t>(id);
}

std::vector<std::uint32_t> SentencePieceTokenizer::encode(const std::string& text) {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw UserError("SentencePiece model '" + path_ + "' cannot encode the text: " + status.ToString());
  return std::vector<std::uint32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  std::vector<int> signed_ids;
  signed_ids.reserve(ids.size());
  for (std::uint32_t id : ids) {
    if (id >= static_cast<std::uint32_t>(vocab_size()))
      throw UserError("token id " + std::to_string(id) + " is not in the vocabulary of SentencePiece model '" + path_ + "' (" +
                      std::to_string(vocab_size()) + ")");
    signed_ids.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = sp_->Decode(signed_ids, &text);
  if (!status.ok()) throw UserError("SentencePiece model '" + path_ + "' cannot decode: " + status.ToString());
  return text;
}

void train_sentencepiece(const std::string& text, int vocab_size, const std::string& prefix) {
  LineIterator lines(text);
  const std::unordered_map<std::string, std::string> options = {
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", "unigram"},
      {"character_coverage", "1.0"},
      // Lossless: no Unicode normalisation, whitespace kept as it is, bytes for what has no piece.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"minloglevel", "1"},
  };
  std::string model;  // the trainer hands the model over instead of writing files unchecked
  const auto status = sentencepiece::SentencePieceTrainer::Train(options, &lines, &model);
  if (!status.ok())
    throw UserError("SentencePiece training of '" + prefix + ".model' failed: " + status.ToString() +
                    " (a smaller --vocab-size, or more text, usually helps)");
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(model).ok()) throw UserError("SentencePiece's trainer made a model it cannot load ('" + prefix + ".model')");
  std::ostringstream vocab;  // what the trainer writes as PREFIX.vocab: piece, tab, score
  for (int id = 0; id < sp.GetPieceSize(); ++id) vocab << sp.IdToPiece(id) << "\t" << sp.GetScore(id) << "\n";
  StagedFile model_file(prefix + ".model", "SentencePiece model"), vocab_file(prefix + ".vocab", "SentencePiece vocabulary");
  model_file.write(model);
  vocab_file.write(vocab.str());
  model_file.finish();
  vocab_file.finish();
  model_file.publish();
  vocab_file.publish();
}

}  // namespace dtrain
