// dtrain-data's reading side: the input files (text, or JSON Lines; plain, .gz or .zst) cut into
// documents, tokenised by N worker threads (each with its own copy of the tokenizer) and handed to a
// sink in input order, so that the output is the same bytes whatever N.
//   text         a document per paragraph (up to the next non-blank line after a blank one)
//   JSON Lines   (.jsonl or .json, then optionally .gz/.zst) a document per line and key: the string
//                values of json_keys (Megatron's --json-keys: one stream each), or with sft one
//                fine-tuning record per line rendered by the chat template, with its loss mask
// A bad line is a UserError naming the file and line, or with skip_bad_lines counted and reported.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {

enum class InputKind { text, json };
// By the name: .jsonl or .json, before an optional .gz or .zst, is JSON Lines; anything else text.
InputKind input_kind(const std::string& path);

struct IngestOptions {
  std::vector<std::string> inputs;  // all of one kind
  std::vector<std::string> json_keys{"text"};
  bool sft = false;
  ChatTemplate chat_template = ChatTemplate::plain;
  bool append_eod = false;  // every document ends with the tokenizer's end-of-document token (sft: always)
  bool skip_bad_lines = false;
  int workers = 1;                // tokenising threads; 0: on the reading thread (no scheduling in the outcome)
  std::uint64_t max_tokens = 0;  // sft: a record of more tokens is refused (0: no bound) ...
  bool truncate = false;         // ... or cut to max_tokens, its last token then the end-of-document token
  bool progress = false;         // a progress line on stderr (a terminal), rewritten in place
};

// Streams: 1 for text and sft, json_keys.size() for JSON pretraining.
std::size_t ingest_streams(const IngestOptions& options, InputKind kind);

// One document of stream `stream`: its tokens and, for sft, its loss mask (else null).
using DocumentSink = std::function<void(std::size_t stream, const std::uint32_t* tokens, std::size_t n, const std::uint8_t* mask)>;

struct IngestReport {
  std::uint64_t documents = 0;   // given to the sink
  std::uint64_t empty = 0;       // no tokens: not given
  std::uint64_t truncated = 0;   // sft records cut to max_tokens
  std::uint64_t skipped = 0;     // bad lines skipped (skip_bad_lines)
  std::string first_skipped;     // "FILE:LINE: why"
  std::uint64_t bytes = 0;       // of text read (after decompression)
  std::uint64_t tokens = 0;
  double seconds = 0.0;
};

IngestReport ingest(const IngestOptions& options, const Tokenizer& tokenizer, const DocumentSink& sink);

}  // namespace dtrain
