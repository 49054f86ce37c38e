// JsonRecordParser: simdjson's DOM parser over a padded copy of the line, and the record forms.
#include "data/json_record.hpp"

#include <simdjson.h>

#include <algorithm>
#include <string_view>

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

// The value of the last field named `key`: Python's json keeps the last of duplicate keys, and so does
// dtrain-data (simdjson's at_key finds the first).
bool last_field(simdjson::dom::object obj, std::string_view key, simdjson::dom::element& out) {
  bool found = false;
  for (const simdjson::dom::key_value_pair field : obj)
    if (field.key == key) out = field.value, found = true;
  return found;
}

// The length of the JSON number at p (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), or 0 when
// the characters there are not one.
std::size_t json_number_length(const char* p, std::size_t n) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < n && p[i] >= '0' && p[i] <= '9') ++i;
    return i - from;
  };
  if (i < n && p[i] == '-') ++i;
  if (i < n && p[i] == '0')
    ++i;
  else if (digits() == 0)
    return 0;
  if (i < n && p[i] == '.' && (++i, digits() == 0)) return 0;
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    ++i;
    if (i < n && (p[i] == '+' || p[i] == '-')) ++i;
    if (digits() == 0) return 0;
  }
  return i;
}

// Python's json reads every number of valid syntax (a 30-digit integer exactly, 1e999 as infinity),
// where simdjson refuses those beyond 64 bits or a double's range. A number is never a document's text,
// so when simdjson refuses one, every number of valid syntax outside strings becomes a 0 of the same
// length (spaces after it) and the line is parsed again: only what JSON itself refuses stays an error.
bool zero_numbers(char* p, std::size_t n) {
  static constexpr std::string_view kNumberChars = "+-.0123456789eE";
  bool changed = false, in_string = false;
  for (std::size_t i = 0; i < n;) {
    if (in_string) {
      in_string = p[i] != '"';
      i += p[i] == '\\' ? 2 : 1;
      continue;
    }
    if (p[i] == '"') {
      in_string = true, ++i;
      continue;
    }
    if (p[i] != '-' && (p[i] < '0' || p[i] > '9')) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < n && kNumberChars.find(p[end]) != std::string_view::npos) ++end;
    if (json_number_length(p + i, end - i) == end - i) {
      p[i] = '0';
      std::fill(p + i + 1, p + end, ' ');
      changed = true;
    }
    i = end;
  }
  return changed;
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
    if (line.substr(0, 3) == "\xEF\xBB\xBF")
      throw RecordError("the line starts with a UTF-8 byte order mark (bytes EF BB BF), which JSON does not allow (Python's json "
                        "refuses it too); remove it, e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' FILE");
    padded.assign(line.data(), line.size());
    padded.resize(line.size() + simdjson::SIMDJSON_PADDING, '\0');
    simdjson::dom::element doc;
    auto err = parser.parse(padded.data(), line.size(), false).get(doc);
    if (err == simdjson::NUMBER_ERROR && zero_numbers(padded.data(), line.size()))
      err = parser.parse(padded.data(), line.size(), false).get(doc);
    if (err) {
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
    if (!last_field(obj, key, value)) throw RecordError("the object has no key \"" + key + "\" (see --json-keys)");
    out.push_back(string_of(value, "\"" + key + "\""));
  }
  return out;
}

SftRecord JsonRecordParser::sft(std::string_view line) {
  const simdjson::dom::object obj = impl_->object(line);
  SftRecord r;
  simdjson::dom::element messages;
  if (last_field(obj, "messages", messages)) {
    simdjson::dom::array list;
    if (messages.get_array().get(list)) throw RecordError(std::string("\"messages\" is ") + type_name(messages.type()) + ", not an array");
    std::size_t i = 0;
    for (simdjson::dom::element m : list) {
      const std::string what = "message " + std::to_string(++i);
      simdjson::dom::object mo;
      if (m.get_object().get(mo)) throw RecordError(what + " is " + type_name(m.type()) + ", not an object with role and content");
      simdjson::dom::element role, content;
      if (!last_field(mo, "role", role)) throw RecordError(what + " has no \"role\"");
      if (!last_field(mo, "content", content)) throw RecordError(what + " has no \"content\"");
      ChatMessage msg{string_of(role, what + "'s \"role\""), string_of(content, what + "'s \"content\"")};
      if (msg.role.empty()) throw RecordError(what + " has an empty role");
      r.messages.push_back(std::move(msg));
    }
    if (r.messages.empty()) throw RecordError("\"messages\" is empty");
    bool answered = false;
    for (std::size_t k = 0; k < r.messages.size(); ++k) {
      if (r.messages[k].role != "assistant") continue;
      if (r.messages[k].content.empty())
        throw RecordError("message " + std::to_string(k + 1) + " is an empty assistant answer: nothing to train on (it would teach "
                          "the model to stop at once); give it content or drop it");
      answered = true;
    }
    if (!answered) throw RecordError("no assistant message with content: nothing to train on (an empty completion)");
    return r;
  }
  for (const auto& [prompt_key, completion_key] : {std::pair{"prompt", "completion"}, std::pair{"input", "output"}}) {
    simdjson::dom::element prompt, completion;
    if (!last_field(obj, prompt_key, prompt)) continue;
    if (!last_field(obj, completion_key, completion))
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
