// ChatRenderer: the llama3, chatml, qwen3, gemma, mistral and plain templates, segment by segment, with the loss mask.
#include "data/chat_template.hpp"

#include <iterator>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dtrain {
namespace {

constexpr const char* kLlama3Tokens[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
constexpr const char* kChatmlTokens[] = {"<|im_start|>", "<|im_end|>"};
constexpr const char* kQwen3Tokens[] = {"<|im_start|>", "<|im_end|>", "<think>", "</think>"};
constexpr const char* kGemmaTokens[] = {"<bos>", "<start_of_turn>", "<end_of_turn>"};
constexpr const char* kMistralTokens[] = {"<s>", "</s>"};

// The special tokens a template needs, and where to get a tokenizer that has them.
struct TemplateTokens {
  ChatTemplate t;
  const char* name;
  std::vector<const char*> tokens;
  const char* source;
  bool auto_picks = true;  // "auto" may pick it (mistral's tokens are any Llama 2-style tokenizer's)
};
const std::vector<TemplateTokens>& templates_with_tokens() {  // in the order auto tries them
  static const std::vector<TemplateTokens> all = {
      {ChatTemplate::qwen3, "qwen3", {std::begin(kQwen3Tokens), std::end(kQwen3Tokens)}, "a Qwen3 tokenizer.json"},
      {ChatTemplate::chatml, "chatml", {std::begin(kChatmlTokens), std::end(kChatmlTokens)}, "a ChatML tokenizer.json (Qwen2.5, Qwen3)"},
      {ChatTemplate::llama3, "llama3", {std::begin(kLlama3Tokens), std::end(kLlama3Tokens)}, "a Llama 3 tokenizer.json"},
      {ChatTemplate::gemma, "gemma", {std::begin(kGemmaTokens), std::end(kGemmaTokens)}, "a Gemma 3 tokenizer.json"},
      {ChatTemplate::mistral, "mistral", {std::begin(kMistralTokens), std::end(kMistralTokens)}, "a Mistral 7B tokenizer.json", false}};
  return all;
}

std::string missing_tokens(const TemplateTokens& t, const Tokenizer& tokenizer) {
  std::string missing;
  for (const char* token : t.tokens)
    if (!tokenizer.token_id(token)) missing += std::string(missing.empty() ? "" : ", ") + token;
  return missing;
}

// Python's s.strip(chars), s.lstrip(chars), s.rstrip(chars) for ASCII chars.
std::string lstrip(const std::string& s, const char* chars) {
  const std::size_t b = s.find_first_not_of(chars);
  return b == std::string::npos ? std::string() : s.substr(b);
}
std::string rstrip(const std::string& s, const char* chars) {
  const std::size_t e = s.find_last_not_of(chars);
  return e == std::string::npos ? std::string() : s.substr(0, e + 1);
}
std::string strip(const std::string& s, const char* chars) { return lstrip(rstrip(s, chars), chars); }

// Qwen3's reading of an assistant message: with "</think>" in it, the reasoning (before the last
// "</think>", after the last "<think>" in that, "\n" trimmed) and the answer (after the last
// "</think>", leading "\n" stripped); else no reasoning and the content as it is.
struct Qwen3Answer {
  std::string reasoning, content;
};
Qwen3Answer qwen3_answer(const std::string& content) {
  const std::size_t close = content.find("</think>");
  if (close == std::string::npos) return {std::string(), content};
  const std::size_t last_close = content.rfind("</think>");
  std::string before = rstrip(content.substr(0, close), "\n");  // split('</think>')[0]
  const std::size_t open = before.rfind("<think>");
  if (open != std::string::npos) before = before.substr(open + 7);
  return {lstrip(before, "\n"), lstrip(content.substr(last_close + 8), "\n")};
}

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
  bool after_text = false;  // the next run goes on from text with nothing between (encode_continuation)
  void flush() {
    if (run.empty()) return;
    const std::vector<std::uint32_t> ids = after_text ? tok.encode_continuation(run) : tok.encode(run);
    after_text = true;
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
  // Text encoded from here on starts afresh (a prompt / completion pair's completion, as NeMo encodes it).
  void apart() {
    flush();
    after_text = false;
  }
  void id(std::uint32_t t, bool trained) {
    flush();
    after_text = false;
    out.tokens.push_back(t);
    out.mask.push_back(trained ? 1 : 0);
  }
  MaskedTokens done() {
    flush();
    return std::move(out);
  }
};

// The messages of a template whose roles alternate user, assistant after an optional first system
// message (Gemma's and Mistral's raise an exception otherwise): the system message's content (empty if
// none), and the index of the first other message.
std::size_t alternating_turns(const SftRecord& record, const char* name, std::string& system) {
  const std::size_t first = !record.messages.empty() && record.messages[0].role == "system" ? 1 : 0;
  system = first ? record.messages[0].content : std::string();
  for (std::size_t i = first; i < record.messages.size(); ++i) {
    const std::string want = (i - first) % 2 == 0 ? "user" : "assistant";
    if (record.messages[i].role != want)
      throw UserError("message " + std::to_string(i + 1) + " has the role '" + record.messages[i].role + "' where the " + name +
                      " template needs '" + want + "': after an optional first system message, roles alternate user, assistant");
  }
  return first;
}

// Gemma 3's turns: <bos>, then <start_of_turn>ROLE\n[SYSTEM\n\n]CONTENT<end_of_turn>\n per message.
MaskedTokens render_gemma(const SftRecord& record, Builder& b, std::uint32_t bos, std::uint32_t start_turn, std::uint32_t end_turn,
                          std::optional<std::uint32_t> eod) {
  std::string system;
  const std::size_t first = alternating_turns(record, "gemma", system);
  b.id(bos, false);
  for (std::size_t i = first; i < record.messages.size(); ++i) {
    const ChatMessage& m = record.messages[i];
    const bool trained = m.role == "assistant";
    b.id(start_turn, false);
    b.text(trained ? "model\n" : m.role + "\n" + (i == first && first ? system + "\n\n" : std::string()), false);
    b.text(trim_whitespace(m.content), trained);
    b.id(end_turn, trained);
    b.text("\n", false);
  }
  if (eod) b.id(*eod, false);
  return b.done();
}

// Mistral 7B Instruct v0.1's: <s>, then "[INST] USER [/INST]" per question and ANSWER</s> per answer.
MaskedTokens render_mistral(const SftRecord& record, Builder& b, std::uint32_t bos, std::uint32_t eos, std::optional<std::uint32_t> eod) {
  std::string system;
  const std::size_t first = alternating_turns(record, "mistral", system);
  b.id(bos, false);
  bool closed = false;
  for (std::size_t i = first; i < record.messages.size(); ++i) {
    const ChatMessage& m = record.messages[i];
    closed = m.role == "assistant";
    if (!closed) {
      b.text("[INST] " + (i == first && first ? system + "\n\n" : std::string()) + m.content + " [/INST]", false);
      continue;
    }
    b.text(m.content, true);
    b.id(eos, true);
  }
  if (eod && !(closed && *eod == eos)) b.id(*eod, false);
  return b.done();
}

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
  if (name == "plain") return ChatTemplate::plain;
  for (const TemplateTokens& t : templates_with_tokens())
    if (name == "auto" && t.auto_picks && missing_tokens(t, tokenizer).empty()) return t.t;
  if (name == "auto") return ChatTemplate::plain;
  for (const TemplateTokens& t : templates_with_tokens()) {
    if (name != t.name) continue;
    const std::string missing = missing_tokens(t, tokenizer);
    if (!missing.empty())
      throw UserError("--chat-template " + name + " needs the tokens " + missing + ", which the tokenizer (" + tokenizer.identity() +
                      ") lacks; use " + t.source + " (--tokenizer hf:DIR) or --chat-template plain");
    if (t.t == ChatTemplate::mistral && tokenizer.token_id("[INST]"))
      throw UserError("--chat-template mistral renders Mistral 7B Instruct v0.1's template, with \"[INST]\" as text; the tokenizer (" +
                      tokenizer.identity() + ") has [INST] as a token (Mistral's tokenizer V2, V3 or Tekken), whose spacing "
                      "dtrain does not render yet; use --chat-template plain");
    return t.t;
  }
  throw UserError("unknown --chat-template '" + name + "'; the templates are: auto, qwen3, chatml, llama3, gemma, mistral, plain");
}

const char* chat_template_name(ChatTemplate t) {
  for (const TemplateTokens& w : templates_with_tokens())
    if (w.t == t) return w.name;
  return "plain";
}

ChatRenderer::ChatRenderer(ChatTemplate t, const Tokenizer& tokenizer) : t_(t), eod_(tokenizer.eod()) {
  const auto id = [&](const char* token) { return *tokenizer.token_id(token); };  // chat_template_for checked them
  if (t_ == ChatTemplate::llama3) {
    std::uint32_t* ids[] = {&bos_, &start_header_, &end_header_, &eot_};
    for (int i = 0; i < 4; ++i) *ids[i] = id(kLlama3Tokens[i]);
  }
  if (t_ == ChatTemplate::chatml || t_ == ChatTemplate::qwen3) im_start_ = id("<|im_start|>"), im_end_ = id("<|im_end|>");
  if (t_ == ChatTemplate::qwen3) think_ = id("<think>"), end_think_ = id("</think>");
  if (t_ == ChatTemplate::gemma) bos_ = id("<bos>"), start_turn_ = id("<start_of_turn>"), end_turn_ = id("<end_of_turn>");
  if (t_ == ChatTemplate::mistral) bos_ = id("<s>"), eos_ = id("</s>");
}

MaskedTokens ChatRenderer::render(const SftRecord& record, Tokenizer& tokenizer) const {
  Builder b{{}, tokenizer, {}, false, false};
  const std::size_t n = record.messages.size();
  if (record.pair) {
    b.text(record.messages[0].content, false);
    b.apart();  // the prompt and the completion are encoded apart, as NeMo does
    b.text(record.messages[1].content, true);
    if (eod_) b.id(*eod_, true);  // the completion ends here: the model learns to stop
    return b.done();
  }
  bool closed_by_eod = false;
  if (t_ == ChatTemplate::chatml || t_ == ChatTemplate::qwen3) {
    // Qwen3: the last user message that is not a tool's response (the last message without one).
    std::size_t last_query = n - 1;
    for (std::size_t i = n; i-- > 0;) {
      const std::string& c = record.messages[i].content;
      const bool tool_response =
          c.rfind("<tool_response>", 0) == 0 && c.size() >= 16 && c.compare(c.size() - 16, 16, "</tool_response>") == 0;
      if (record.messages[i].role == "user" && !tool_response) {
        last_query = i;
        break;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      const ChatMessage& m = record.messages[i];
      if (m.role != "system" && m.role != "user" && m.role != "assistant")
        throw UserError("message " + std::to_string(i + 1) + " has the role '" + m.role + "'; the " + chat_template_name(t_) +
                        " template renders system, user and assistant messages");
      const bool trained = m.role == "assistant";
      b.id(im_start_, false);
      b.text(m.role + "\n", false);
      if (!trained || t_ == ChatTemplate::chatml) {
        b.text(m.content, trained);
      } else {
        const Qwen3Answer a = qwen3_answer(m.content);
        if (i > last_query && (i + 1 == n || !a.reasoning.empty())) {  // a reasoning block, empty on the last message
          b.id(think_, true);
          b.text("\n" + strip(a.reasoning, "\n") + "\n", true);
          b.id(end_think_, true);
          b.text("\n\n" + lstrip(a.content, "\n"), true);
        } else {
          b.text(a.content, true);
        }
      }
      b.id(im_end_, trained);
      b.text("\n", false);
    }
    if (eod_) b.id(*eod_, false);
    return b.done();
  }
  if (t_ == ChatTemplate::gemma) return render_gemma(record, b, bos_, start_turn_, end_turn_, eod_);
  if (t_ == ChatTemplate::mistral) return render_mistral(record, b, bos_, eos_, eod_);
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
