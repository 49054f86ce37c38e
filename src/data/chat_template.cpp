// ChatRenderer: the llama3 and plain templates, segment by segment, with the loss mask.
#include "data/chat_template.hpp"

#include "common/error.hpp"

namespace dtrain {
namespace {

constexpr const char* kLlama3Tokens[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};

// The code point starting at s[i] and its length in bytes (s is valid UTF-8: simdjson checked it).
char32_t code_point(const std::string& s, std::size_t i, int& len) {
  const auto c = static_cast<unsigned char>(s[i]);
  len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
  if (i + len > s.size()) return len = 1, c;
  char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  return cp;
}

// Python's str.isspace() for one code point.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string capitalised(const std::string& role) {
  std::string r = role;
  if (!r.empty() && r[0] >= 'a' && r[0] <= 'z') r[0] = static_cast<char>(r[0] - 'a' + 'A');
  return r;
}

// Tokens and mask, text encoded in maximal runs of the same trained flag (a special token ends a run):
// the runs' edges are where the mask changes, so a rendering tokenises as its whole text would wherever
// those edges are pre-tokenisation boundaries (the templates put them there).
struct Builder {
  MaskedTokens out;
  Tokenizer& tok;
  std::string run;
  bool run_trained = false;
  void flush() {
    if (run.empty()) return;
    const std::vector<std::uint32_t> ids = tok.encode(run);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.mask.insert(out.mask.end(), ids.size(), run_trained ? 1 : 0);
    run.clear();
  }
  void text(const std::string& s, bool trained) {
    if (s.empty()) return;
    if (trained != run_trained) flush();
    run_trained = trained;
    run += s;
  }
  void id(std::uint32_t t, bool trained) {
    flush();
    out.tokens.push_back(t);
    out.mask.push_back(trained ? 1 : 0);
  }
  MaskedTokens done() {
    flush();
    return std::move(out);
  }
};

}  // namespace

std::string trim_whitespace(const std::string& s) {
  std::size_t begin = 0, end = s.size();
  int len = 0;
  while (begin < end && is_python_space(code_point(s, begin, len))) begin += len;
  // Backwards: find the start of the last code point (continuation bytes are 10xxxxxx).
  while (end > begin) {
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (!is_python_space(code_point(s, start, len))) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

ChatTemplate chat_template_for(const std::string& name, const Tokenizer& tokenizer) {
  std::string missing;
  for (const char* t : kLlama3Tokens)
    if (!tokenizer.token_id(t)) missing += std::string(missing.empty() ? "" : ", ") + t;
  if (name == "auto") return missing.empty() ? ChatTemplate::llama3 : ChatTemplate::plain;
  if (name == "plain") return ChatTemplate::plain;
  if (name != "llama3") throw UserError("unknown --chat-template '" + name + "'; the templates are: auto, llama3, plain");
  if (!missing.empty())
    throw UserError("--chat-template llama3 needs the tokens " + missing + ", which the tokenizer (" + tokenizer.identity() +
                    ") lacks; use a Llama 3 tokenizer.json (--tokenizer hf:DIR) or --chat-template plain");
  return ChatTemplate::llama3;
}

const char* chat_template_name(ChatTemplate t) { return t == ChatTemplate::llama3 ? "llama3" : "plain"; }

ChatRenderer::ChatRenderer(ChatTemplate t, const Tokenizer& tokenizer) : t_(t), eod_(tokenizer.eod()) {
  if (t_ != ChatTemplate::llama3) return;
  std::uint32_t* ids[] = {&bos_, &start_header_, &end_header_, &eot_};
  for (int i = 0; i < 4; ++i) *ids[i] = *tokenizer.token_id(kLlama3Tokens[i]);  // chat_template_for checked them
}

MaskedTokens ChatRenderer::render(const SftRecord& record, Tokenizer& tokenizer) const {
  Builder b{{}, tokenizer, {}, false};
  const std::size_t n = record.messages.size();
  if (record.pair) {
    b.text(record.messages[0].content, false);
    b.flush();  // the prompt and the completion are encoded apart, as NeMo does
    b.text(record.messages[1].content, true);
    if (eod_) b.id(*eod_, true);  // the completion ends here: the model learns to stop
    return b.done();
  }
  bool closed_by_eod = false;
  if (t_ == ChatTemplate::llama3) b.id(bos_, false);
  for (std::size_t i = 0; i < n; ++i) {
    const ChatMessage& m = record.messages[i];
    const bool trained = m.role == "assistant";
    if (t_ == ChatTemplate::llama3) {
      b.id(start_header_, false);
      b.text(m.role, false);
      b.id(end_header_, false);
      b.text("\n\n", false);
      b.text(trim_whitespace(m.content), trained);
      b.id(eot_, trained);
      continue;
    }
    if (!trained) {
      b.text(capitalised(m.role) + ":\n" + trim_whitespace(m.content) + "\n\n", false);
      continue;
    }
    b.text("Assistant:\n", false);
    b.text(trim_whitespace(m.content), true);
    if (i + 1 == n && eod_) {
      b.id(*eod_, true);
      closed_by_eod = true;
    } else {
      b.text("\n", true);  // the answer's end is trained, the blank line before the next message not
      b.text("\n", false);
    }
  }
  if (eod_ && !closed_by_eod) b.id(*eod_, false);
  return b.done();
}

}  // namespace dtrain
