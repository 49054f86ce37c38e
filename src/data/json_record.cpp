// JsonRecordParser: simdjson's DOM parser over a padded copy of the line, and the record forms.
#include "data/json_record.hpp"

#include <simdjson.h>

namespace dtrain {
namespace {

const char* type_name(simdjson::dom::element_type t) {
  switch (t) {
    case simdjson::dom::element_type::ARRAY: return "an array";
    case simdjson::dom::element_type::OBJECT: return "an object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: return "a number";
    case simdjson::dom::element_type::STRING: return "a string";
    case simdjson::dom::element_type::BOOL: return "a boolean";
    case simdjson::dom::element_type::NULL_VALUE: return "null";
  }
  return "a value";
}

std::string string_of(simdjson::dom::element e, const std::string& what) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) throw RecordError(what + " is " + type_name(e.type()) + ", not a string");
  return std::string(s);
}

}  // namespace

struct JsonRecordParser::Impl {
  simdjson::dom::parser parser;
  std::string padded;

  simdjson::dom::object object(std::string_view line) {
    padded.assign(line.data(), line.size());
    padded.resize(line.size() + simdjson::SIMDJSON_PADDING, '\0');
    simdjson::dom::element doc;
    if (const auto err = parser.parse(padded.data(), line.size(), false).get(doc)) {
      if (err == simdjson::UTF8_ERROR) throw RecordError("the line is not valid UTF-8");
      if (err == simdjson::DEPTH_ERROR) throw RecordError("the JSON nests deeper than 1024 levels");
      if (err == simdjson::EMPTY) throw RecordError("the line is empty, not a JSON object");
      throw RecordError(std::string("the line is not valid JSON (simdjson: ") + simdjson::error_message(err) + ")");
    }
    simdjson::dom::object obj;
    if (doc.get_object().get(obj)) throw RecordError(std::string("the line is ") + type_name(doc.type()) + ", not a JSON object");
    return obj;
  }
};

JsonRecordParser::JsonRecordParser() : impl_(std::make_unique<Impl>()) {}
JsonRecordParser::~JsonRecordParser() = default;
JsonRecordParser::JsonRecordParser(JsonRecordParser&&) noexcept = default;
JsonRecordParser& JsonRecordParser::operator=(JsonRecordParser&&) noexcept = default;

std::vector<std::string> JsonRecordParser::texts(std::string_view line, const std::vector<std::string>& keys) {
  const simdjson::dom::object obj = impl_->object(line);
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) {
    simdjson::dom::element value;
    if (obj.at_key(key).get(value)) throw RecordError("the object has no key \"" + key + "\" (see --json-keys)");
    out.push_back(string_of(value, "\"" + key + "\""));
  }
  return out;
}

SftRecord JsonRecordParser::sft(std::string_view line) {
  const simdjson::dom::object obj = impl_->object(line);
  SftRecord r;
  simdjson::dom::element messages;
  if (obj.at_key("messages").get(messages) == simdjson::SUCCESS) {
    simdjson::dom::array list;
    if (messages.get_array().get(list)) throw RecordError(std::string("\"messages\" is ") + type_name(messages.type()) + ", not an array");
    std::size_t i = 0;
    for (simdjson::dom::element m : list) {
      const std::string what = "message " + std::to_string(++i);
      simdjson::dom::object mo;
      if (m.get_object().get(mo)) throw RecordError(what + " is " + type_name(m.type()) + ", not an object with role and content");
      simdjson::dom::element role, content;
      if (mo.at_key("role").get(role)) throw RecordError(what + " has no \"role\"");
      if (mo.at_key("content").get(content)) throw RecordError(what + " has no \"content\"");
      ChatMessage msg{string_of(role, what + "'s \"role\""), string_of(content, what + "'s \"content\"")};
      if (msg.role.empty()) throw RecordError(what + " has an empty role");
      r.messages.push_back(std::move(msg));
    }
    if (r.messages.empty()) throw RecordError("\"messages\" is empty");
    bool answered = false;
    for (const ChatMessage& m : r.messages) answered = answered || (m.role == "assistant" && !m.content.empty());
    if (!answered) throw RecordError("no assistant message with content: nothing to train on (an empty completion)");
    return r;
  }
  for (const auto& [prompt_key, completion_key] : {std::pair{"prompt", "completion"}, std::pair{"input", "output"}}) {
    simdjson::dom::element prompt, completion;
    if (obj.at_key(prompt_key).get(prompt)) continue;
    if (obj.at_key(completion_key).get(completion))
      throw RecordError(std::string("the object has \"") + prompt_key + "\" but no \"" + completion_key + "\"");
    r.pair = true;
    r.messages.push_back({"user", string_of(prompt, std::string("\"") + prompt_key + "\"")});
    r.messages.push_back({"assistant", string_of(completion, std::string("\"") + completion_key + "\"")});
    if (r.messages.back().content.empty()) throw RecordError(std::string("\"") + completion_key + "\" is empty: nothing to train on (an empty completion)");
    return r;
  }
  throw RecordError("the object has none of \"messages\", \"prompt\"/\"completion\", \"input\"/\"output\" (the fine-tuning record forms)");
}

}  // namespace dtrain
