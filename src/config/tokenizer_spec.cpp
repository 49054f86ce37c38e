// parse_tokenizer_spec: KIND or KIND:ARGUMENT.
#include "config/tokenizer_spec.hpp"

#include "common/error.hpp"

namespace dtrain {

TokenizerSpec parse_tokenizer_spec(const std::string& value) {
  const auto colon = value.find(':');
  const TokenizerSpec spec{value.substr(0, colon), colon == std::string::npos ? "" : value.substr(colon + 1)};
  const bool has_arg = colon != std::string::npos;
  if (value == "byte") return spec;
  if (spec.kind == "gpt2" && !has_arg) return {"gpt2", kGpt2DefaultDir};
  if ((spec.kind == "gpt2" || spec.kind == "sentencepiece") && !spec.arg.empty()) return spec;
  throw UserError("unknown tokenizer '" + value + "'; use byte, gpt2 (files in " + kGpt2DefaultDir +
                  "), gpt2:DIR or sentencepiece:MODEL_FILE");
}

}  // namespace dtrain
