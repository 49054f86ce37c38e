// parse_tokenizer_spec: KIND or KIND:ARGUMENT.
#include "config/tokenizer_spec.hpp"

#include "common/error.hpp"

namespace dtrain {

const char* tokenizer_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::byte:
      return "byte";
    case TokenizerKind::gpt2:
      return "gpt2";
    case TokenizerKind::hf:
      return "hf";
    case TokenizerKind::sentencepiece:
      return "sentencepiece";
  }
  return "?";
}

TokenizerSpec parse_tokenizer_spec(const std::string& value) {
  const auto colon = value.find(':');
  const std::string kind = value.substr(0, colon), arg = colon == std::string::npos ? "" : value.substr(colon + 1);
  const bool has_arg = colon != std::string::npos;
  if (value == "byte") return {TokenizerKind::byte, ""};
  if (kind == "gpt2" && !has_arg) return {TokenizerKind::gpt2, kGpt2DefaultDir};
  if (kind == "gpt2" && !arg.empty()) return {TokenizerKind::gpt2, arg};
  if (kind == "hf" && !arg.empty()) return {TokenizerKind::hf, arg};
  if (kind == "sentencepiece" && !arg.empty()) return {TokenizerKind::sentencepiece, arg};
  throw UserError("unknown tokenizer '" + value + "'; use byte, gpt2 (files in " + kGpt2DefaultDir +
                  "), gpt2:DIR, hf:DIR (Hugging Face's tokenizer.json, or vocab.json and merges.txt) or sentencepiece:MODEL_FILE");
}

}  // namespace dtrain
