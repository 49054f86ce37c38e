// The files of a byte-level BPE (GPT-2's scheme, which Hugging Face calls ByteLevel BPE), read into one
// form: the vocabulary (token text in GPT-2's byte-to-unicode map -> id) and the merges in rank order.
// Three sources: GPT-2's own encoder.json + vocab.bpe; Hugging Face's vocab.json + merges.txt (the same
// formats); and Hugging Face's tokenizer.json, whose BPE model with GPT-2's pre-tokenizer (ByteLevel
// with its regex, no prefix space), Llama 3's (a Split on its regex, then ByteLevel without one;
// ignore_merges) or Qwen's (Llama 3's with single digits, after an NFC normalizer) dtrain implements;
// other tokenizer.json models, pre-tokenizers and normalizers are refused by name. tokenizer.json files
// of SentencePiece-style BPE (byte_fallback: Llama 2, Mistral, Gemma) go to metaspace_bpe_tokenizer.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace dtrain {

struct ByteLevelBpeFiles {
  nlohmann::json vocab;             // token text -> id
  std::vector<std::string> merges;  // "LEFT RIGHT", rank order
  std::string vocab_file, merges_file;  // where each came from, for errors
  std::string hint;                     // how to get good files, for errors
  enum class Split { gpt2, llama3, qwen2 };
  Split split = Split::gpt2;   // the pre-tokeniser's pattern
  bool nfc = false;            // normalise the text to NFC first (Qwen's normalizer)
  bool ignore_merges = false;  // a piece that is a token as a whole is that token (Llama 3's BPE)
  int first_merge_line = 0;    // the text line of merges[0] (0: a JSON array), for errors
};

// GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves, the other 68 bytes for
// U+0100 onwards in byte order, so every token is printable text.
char32_t gpt2_byte_unicode(unsigned char byte);

// encoder.json + vocab.bpe, or vocab.json + merges.txt; UserError naming the file that cannot be read or parsed.
ByteLevelBpeFiles read_vocab_and_merges(const std::string& vocab_json, const std::string& merges_txt, const std::string& hint);
// A Hugging Face tokenizer.json; UserError naming the file and what dtrain does not implement.
ByteLevelBpeFiles read_tokenizer_json(const std::string& path);
ByteLevelBpeFiles read_tokenizer_json(const nlohmann::json& parsed, const std::string& path);
// The JSON of tokenizer file `path`; UserError naming it if it cannot be read or is not JSON.
nlohmann::json parse_tokenizer_json(const std::string& path, const std::string& hint);
// Whether a parsed tokenizer.json is a SentencePiece-style BPE (its model sets byte_fallback).
bool is_byte_fallback_bpe(const nlohmann::json& parsed);

}  // namespace dtrain
