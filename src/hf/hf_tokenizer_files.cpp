// hf_tokenizer_files: tokenizer.json built from the vocabulary and merges (the structure of
// GPT-2's file on the Hugging Face Hub), the two source files copied as vocab.json and merges.txt, or a
// SentencePiece model copied.
#include "hf/hf_tokenizer_files.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "config/tokenizer_spec.hpp"
#include "tokenizer/bpe_files.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read the tokenizer file '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tokenizer_json(const ByteLevelBpeFiles& f) {
  using Json = nlohmann::ordered_json;
  const Json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  Json post = byte_level;
  post["trim_offsets"] = false;
  Json added = Json::array();
  if (f.vocab.contains("<|endoftext|>"))
    added.push_back({{"id", f.vocab["<|endoftext|>"]}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", true}, {"special", true}});
  Json merges = Json::array();
  for (const std::string& m : f.merges)
    if (m.find_first_not_of(" \t\r") != std::string::npos) merges.push_back(m);
  Json model = {{"type", "BPE"},       {"dropout", nullptr},
                {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""}, {"fuse_unk", false},
                {"byte_fallback", false}, {"vocab", Json::object()},
                {"merges", merges}};
  // The vocabulary in id order, as the Hub's files list it.
  std::vector<std::pair<std::uint64_t, std::string>> by_id;
  for (const auto& [token, id] : f.vocab.items()) by_id.emplace_back(id.get<std::uint64_t>(), token);
  std::sort(by_id.begin(), by_id.end());
  for (const auto& [id, token] : by_id) model["vocab"][token] = id;
  const Json j = {{"version", "1.0"},          {"truncation", nullptr}, {"padding", nullptr},
                  {"added_tokens", added},     {"normalizer", nullptr}, {"pre_tokenizer", byte_level},
                  {"post_processor", post},    {"decoder", byte_level}, {"model", model}};
  return j.dump(2, ' ', false, Json::error_handler_t::strict) + "\n";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> hf_tokenizer_files(const std::string& spec_text) {
  const TokenizerSpec spec = parse_tokenizer_spec(spec_text);
  switch (spec.kind) {
    case TokenizerKind::byte:
      throw UserError("--tokenizer byte: the byte tokenizer (ids 0-255 are the bytes) has no Hugging Face tokenizer files; "
                      "export without --tokenizer");
    case TokenizerKind::sentencepiece:
      return {{"tokenizer.model", read_file(tokenizer_files(spec_text).front())}};
    case TokenizerKind::gpt2:
    case TokenizerKind::hf:
      break;
  }
  const std::vector<std::string> files = tokenizer_files(spec_text);  // the ones data.tokenizer reads
  if (files.size() == 1) {  // Hugging Face's own tokenizer.json, as it is, and (byte-level BPE) the pair from it
    const nlohmann::json parsed = parse_tokenizer_json(files[0], "check data.tokenizer=" + spec_text);
    if (is_byte_fallback_bpe(parsed)) return {{"tokenizer.json", read_file(files[0])}};
    const ByteLevelBpeFiles f = read_tokenizer_json(parsed, files[0]);
    std::string merges = "#version: 0.2\n";
    for (const std::string& m : f.merges) merges += m + "\n";
    return {{"tokenizer.json", read_file(files[0])}, {"vocab.json", f.vocab.dump() + "\n"}, {"merges.txt", merges}};
  }
  const std::string& vocab = files[0];
  const std::string& merges = files[1];
  const ByteLevelBpeFiles f = read_vocab_and_merges(vocab, merges, "check data.tokenizer=" + spec_text);
  return {{"tokenizer.json", tokenizer_json(f)}, {"vocab.json", read_file(vocab)}, {"merges.txt", read_file(merges)}};
}

}  // namespace dtrain
