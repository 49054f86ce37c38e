// One line of a JSON Lines corpus, parsed by simdjson (DOM: the whole line is validated, UTF-8
// included; nesting is bounded by simdjson's default depth of 1024): the string values of named keys
// (pretraining corpora, Megatron's --json-keys), or a supervised fine-tuning record, in the forms chat
// datasets and NeMo use:
//   {"messages": [{"role": "system"|"user"|"assistant"|..., "content": "..."}, ...]}
//   {"prompt": "...", "completion": "..."}   or   {"input": "...", "output": "..."}
// Every problem throws RecordError with what is wrong; the caller adds the file and line.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

struct RecordError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ChatMessage {
  std::string role, content;
};

struct SftRecord {
  std::vector<ChatMessage> messages;  // {"messages": [...]}; for a pair: the prompt then the completion
  bool pair = false;                  // a prompt/completion (input/output) pair: no chat template
};

class JsonRecordParser {
 public:
  JsonRecordParser();
  ~JsonRecordParser();
  JsonRecordParser(JsonRecordParser&&) noexcept;
  JsonRecordParser& operator=(JsonRecordParser&&) noexcept;

  // The string value of each of `keys` in the object on `line`, in the keys' order.
  std::vector<std::string> texts(std::string_view line, const std::vector<std::string>& keys);
  SftRecord sft(std::string_view line);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain
