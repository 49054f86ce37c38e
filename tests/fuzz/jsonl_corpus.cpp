// Fuzz target: a JSON Lines corpus through dtrain-data's reading side (ingest: lines, JSON records,
// chat templates; the byte tokenizer, and for fine-tuning records, which need an end-of-document token,
// the GPT-2-scheme tokenizer.json of the tokenizer_json corpus). Input: one byte of options, then the
// file. The options byte picks fine-tuning records (bit 0) or pretraining keys ("text", or "text" and
// "title": bit 1), bad lines skipped (bit 2) or refused, and the compression the file is named with
// (bits 3-4 and 6: none, .gz, .zst, .json, .xz, .bz2); the records are capped at 64 tokens and truncated
// or refused (bit 5).
#include <fstream>
#include <iterator>
#include <string>

#include "data/chat_template.hpp"
#include "data/corpus_ingest.hpp"
#include "fuzz/fuzz_target.hpp"

DTRAIN_FUZZ_TARGET(jsonl_corpus) {
  if (size == 0) return;
  const std::uint8_t opt = data[0];
  static const char* const suffix[] = {".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".jsonl.xz", ".jsonl.bz2", ".jsonl", ".json"};
  dtrain::IngestOptions o;
  o.inputs = {dtrain::fuzz::write_scratch(std::string("corpus") + suffix[((opt >> 3) & 3) | ((opt >> 4) & 4)],
                                          {reinterpret_cast<const char*>(data) + 1, size - 1})};
  o.sft = opt & 1;
  if (opt & 2) o.json_keys = {"text", "title"};
  o.skip_bad_lines = opt & 4;
  o.max_tokens = 64;
  o.truncate = opt & 32;
  o.workers = 0;  // on this thread: libFuzzer's coverage, and so its mutations, must not depend on scheduling
  static const auto bytes = dtrain::make_tokenizer("byte");
  static const auto bpe = [] {
    std::ifstream seed(DTRAIN_SOURCE_DIR "/tests/fuzz/corpus/tokenizer_json/seed-python-gpt2-scheme", std::ios::binary);
    const std::string json((std::istreambuf_iterator<char>(seed)), std::istreambuf_iterator<char>());
    dtrain::fuzz::write_scratch("tokenizer.json", json);
    return dtrain::make_tokenizer("hf:" + dtrain::fuzz::scratch_dir());
  }();
  const dtrain::Tokenizer& tokenizer = o.sft ? *bpe : *bytes;
  if (o.sft) o.chat_template = dtrain::chat_template_for("auto", tokenizer);
  std::uint64_t tokens = 0;
  const auto report = dtrain::ingest(o, tokenizer, [&](std::size_t, const std::uint32_t*, std::size_t n, const std::uint8_t*) { tokens += n; });
  if (report.tokens != tokens) std::abort();  // the report counts what the sink was given
}
