// Fuzz target: text (the bytes of a downloaded corpus) encoded by each tokenizer.json scheme dtrain
// implements, loaded from the tokenizer_json seeds: GPT-2's, Llama 3's, Qwen's (NFC through ICU),
// Llama 2's (Prepend, Replace, Strip), Gemma's (Replace, added tokens found in the text) and Metaspace's.
// The first byte picks the tokenizer and whether the text is a continuation (a chat template's run);
// the rest is the text. Beyond not crashing, each encoding must keep encode's promises: ids below
// vocab_size(), and decode(encode(text)) == normalized(text) (the text as the tokenizer normalises it).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "fuzz/fuzz_target.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

std::unique_ptr<dtrain::Tokenizer> from_seed(const std::string& scheme) {
  std::ifstream seed(DTRAIN_SOURCE_DIR "/tests/fuzz/corpus/tokenizer_json/seed-python-" + scheme + "-scheme", std::ios::binary);
  const std::string json((std::istreambuf_iterator<char>(seed)), std::istreambuf_iterator<char>());
  std::filesystem::create_directories(dtrain::fuzz::scratch_dir() + "/text-" + scheme);
  dtrain::fuzz::write_scratch("text-" + scheme + "/tokenizer.json", json);
  return dtrain::make_tokenizer("hf:" + dtrain::fuzz::scratch_dir() + "/text-" + scheme);
}

}  // namespace

DTRAIN_FUZZ_TARGET(tokenizer_text) {
  static const auto tokenizers = [] {
    std::vector<std::unique_ptr<dtrain::Tokenizer>> t;
    for (const char* scheme : {"gpt2", "llama3", "qwen", "llama2", "gemma", "metaspace"}) t.push_back(from_seed(scheme));
    return t;
  }();
  if (size == 0) return;
  dtrain::Tokenizer& tok = *tokenizers[data[0] % tokenizers.size()];
  const bool continuation = (data[0] / tokenizers.size()) & 1;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<std::uint32_t> ids = continuation ? tok.encode_continuation(text) : tok.encode(text);
  for (std::uint32_t id : ids)
    if (static_cast<int>(id) >= tok.vocab_size()) std::abort();
  if (!continuation && tok.decode(ids) != tok.normalized(text)) std::abort();  // encode lost or changed text
}
