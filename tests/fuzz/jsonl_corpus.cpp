// Fuzz target: a JSON Lines corpus through dtrain-data's reading side (ingest: lines, JSON records,
// chat templates, the byte tokenizer). Input: one byte of options, then the file. The options byte
// picks fine-tuning records (bit 0) or pretraining keys ("text", or "text" and "title": bit 1), bad
// lines skipped (bit 2) or refused, and the compression the file is named with (bits 3-4: none, .gz,
// .zst); the records are capped at 64 tokens and truncated or refused (bit 5).
#include "data/corpus_ingest.hpp"
#include "fuzz/fuzz_target.hpp"

DTRAIN_FUZZ_TARGET(jsonl_corpus) {
  if (size == 0) return;
  const std::uint8_t opt = data[0];
  static const char* const suffix[] = {".jsonl", ".jsonl.gz", ".jsonl.zst", ".json"};
  dtrain::IngestOptions o;
  o.inputs = {dtrain::fuzz::write_scratch(std::string("corpus") + suffix[(opt >> 3) & 3],
                                          {reinterpret_cast<const char*>(data) + 1, size - 1})};
  o.sft = opt & 1;
  if (opt & 2) o.json_keys = {"text", "title"};
  o.skip_bad_lines = opt & 4;
  o.max_tokens = 64;
  o.truncate = opt & 32;
  o.workers = 0;  // on this thread: libFuzzer's coverage, and so its mutations, must not depend on scheduling
  static const auto tokenizer = dtrain::make_tokenizer("byte");
  std::uint64_t tokens = 0;
  const auto report = dtrain::ingest(o, *tokenizer, [&](std::size_t, const std::uint32_t*, std::size_t n, const std::uint8_t*) { tokens += n; });
  if (report.tokens != tokens) std::abort();  // the report counts what the sink was given
}
