// JSON from files a user downloads (tokenizer.json, vocab.json, config.json, safetensors headers and
// indexes), parsed with nlohmann/json under bounds taken before any value is built: at most
// kMaxJsonBytes of text and kMaxJsonDepth levels of nesting. The files dtrain reads nest a few levels;
// nlohmann parses without recursion, but copying, comparing and dumping a value recurse once per level,
// so a file of 300,000 '[' overflowed the stack (SIGSEGV) where it now is one error.
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace dtrain {

constexpr int kMaxJsonDepth = 64;
constexpr std::size_t kMaxJsonBytes = std::size_t{1} << 30;

// Parses `text` into `out`; false with the reason in `error` (not JSON, or a bound broken).
bool parse_bounded_json(const std::string& text, nlohmann::json& out, std::string& error);

}  // namespace dtrain
