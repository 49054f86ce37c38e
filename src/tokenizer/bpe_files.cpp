// Reading byte-level BPE files: JSON through nlohmann::json, merges line by line; tokenizer.json's
// model, pre-tokenizer, normalizer and decoder checked against what Gpt2Tokenizer implements.
#include "tokenizer/bpe_files.hpp"

#include "common/bounded_json.hpp"

#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace dtrain {
namespace {

std::string read_text(const std::string& path, const std::string& hint) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError("tokenizer file '" + path + "' is a directory, not a file; " + hint);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read tokenizer file '" + path + "'; " + hint);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

nlohmann::json parse_tokenizer_json(const std::string& path, const std::string& hint) {
  nlohmann::json j;
  std::string error;
  if (!parse_bounded_json(read_text(path, hint), j, error))
    throw UserError("tokenizer file '" + path + "' is not valid JSON (" + error + "); " + hint);
  return j;
}

namespace {

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// Llama 3's pre-tokenizer: a Split on this pattern (isolated pieces), then ByteLevel without its regex.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen's (Qwen2, 2.5, 3): the same with single digits.
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Whether `pre` is a Split on `pattern` (isolated pieces), then ByteLevel without its regex.
bool is_split_then_bytes(const nlohmann::json& pre, const char* pattern) {
  if (!pre.is_object() || pre.value("type", std::string()) != "Sequence" || !pre.contains("pretokenizers")) return false;
  const nlohmann::json& p = pre["pretokenizers"];
  if (!p.is_array() || p.size() != 2 || !p[0].is_object() || !p[1].is_object()) return false;
  const nlohmann::json& split = p[0];
  const nlohmann::json& bytes = p[1];
  return split.value("type", std::string()) == "Split" && split.contains("pattern") && split["pattern"].is_object() &&
         split["pattern"].value("Regex", std::string()) == pattern && split.value("behavior", std::string()) == "Isolated" &&
         !split.value("invert", false) && bytes.value("type", std::string()) == "ByteLevel" && !bytes.value("add_prefix_space", false) &&
         !bytes.value("use_regex", true);
}

// The text of raw bytes in GPT-2's byte-to-unicode map (UTF-8 of the mapped code points, all below U+0800).
std::string byte_mapped(const std::string& raw) {
  std::string out;
  for (unsigned char b : raw) {
    const char32_t c = gpt2_byte_unicode(b);
    if (c < 0x80) out += static_cast<char>(c);
    else out += static_cast<char>(0xC0 | (c >> 6)), out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

}  // namespace

char32_t gpt2_byte_unicode(unsigned char byte) {
  static const auto map = [] {
    std::array<char32_t, 256> m{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      m[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return m;
  }();
  return map[byte];
}

ByteLevelBpeFiles read_vocab_and_merges(const std::string& vocab_json, const std::string& merges_txt, const std::string& hint) {
  ByteLevelBpeFiles f;
  f.vocab_file = vocab_json, f.merges_file = merges_txt, f.hint = hint;
  f.vocab = parse_tokenizer_json(vocab_json, hint);
  std::istringstream lines(read_text(merges_txt, hint));
  std::string line;
  f.first_merge_line = 1;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written with CRLF
    if (number == 1 && line.rfind("#version", 0) == 0) {
      f.first_merge_line = 2;
      continue;
    }
    f.merges.push_back(line);
  }
  return f;
}

namespace {

constexpr const char* kTokenizerJsonHint =
    "dtrain reads tokenizer.json files of byte-level BPE with GPT-2's, Llama 3's or Qwen's pre-tokenizer, and of "
    "SentencePiece-style BPE with byte_fallback (Llama 2, Mistral, Gemma)";

ByteLevelBpeFiles read_tokenizer_json_checked(const nlohmann::json& j, const std::string& path) {
  const std::string hint = kTokenizerJsonHint;
  const auto refuse = [&](const std::string& what) { return UserError("tokenizer file '" + path + "': " + what + "; " + hint); };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) throw refuse("no \"model\" object");
  const nlohmann::json& m = j["model"];
  if (m.value("type", std::string()) != "BPE") throw refuse("its model is " + dump(m.value("type", nlohmann::json())) + ", not BPE");
  if (m.contains("dropout") && !m["dropout"].is_null()) throw refuse("its BPE model has a dropout, which dtrain does not implement");
  if (m.contains("end_of_word_suffix") && !m["end_of_word_suffix"].is_null() && m["end_of_word_suffix"] != "")
    throw refuse("its BPE model has an end_of_word_suffix");
  if (j.contains("decoder") && !j["decoder"].is_null() && j["decoder"].value("type", std::string()) != "ByteLevel")
    throw refuse("its decoder is " + dump(j["decoder"]) + ", not ByteLevel");
  if (m.contains("continuing_subword_prefix") && !m["continuing_subword_prefix"].is_null() && m["continuing_subword_prefix"] != "")
    throw refuse("its BPE model has a continuing_subword_prefix");
  const nlohmann::json normalizer = j.value("normalizer", nlohmann::json());
  const bool nfc = normalizer.is_object() && normalizer.size() == 1 && normalizer.value("type", std::string()) == "NFC";
  if (!normalizer.is_null() && !nfc) throw refuse("it has a normalizer " + dump(normalizer) + " (dtrain implements NFC only)");
  const nlohmann::json pre = j.value("pre_tokenizer", nlohmann::json());
  const bool gpt2 = pre.is_object() && pre.value("type", std::string()) == "ByteLevel" && !pre.value("add_prefix_space", false) &&
                    pre.value("use_regex", true);
  const bool llama3 = !gpt2 && is_split_then_bytes(pre, kLlama3Pattern);
  const bool qwen2 = !gpt2 && !llama3 && is_split_then_bytes(pre, kQwen2Pattern);
  if (!gpt2 && !llama3 && !qwen2)
    throw refuse("its pre_tokenizer is " + dump(pre) +
                 ", none of GPT-2's (ByteLevel with its regex, no prefix space), Llama 3's and Qwen's");
  if (!m.contains("vocab") || !m["vocab"].is_object()) throw refuse("its model has no vocab object");
  if (!m.contains("merges") || !m["merges"].is_array()) throw refuse("its model has no merges array");
  ByteLevelBpeFiles f;
  f.vocab_file = f.merges_file = path, f.hint = hint;
  f.split = gpt2 ? ByteLevelBpeFiles::Split::gpt2 : llama3 ? ByteLevelBpeFiles::Split::llama3 : ByteLevelBpeFiles::Split::qwen2;
  f.nfc = nfc;
  f.ignore_merges = m.value("ignore_merges", false);
  f.vocab = m["vocab"];
  for (const auto& merge : m["merges"]) {
    // "LEFT RIGHT" (tokenizers < 0.20), or ["LEFT", "RIGHT"].
    if (merge.is_string()) f.merges.push_back(merge.get<std::string>());
    else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
      f.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
    else throw refuse("its merges hold " + dump(merge) + ", not a pair of tokens");
  }
  // Added tokens (GPT-2's <|endoftext|>, Llama 3's 256 special tokens) join the vocabulary with their
  // ids when they are not in it already. Hugging Face splits them out of the text before the BPE runs;
  // dtrain encodes such text as ordinary text (documented).
  if (!f.vocab.is_object()) return f;
  for (const auto& t : j.value("added_tokens", nlohmann::json::array())) {
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id") || !t["id"].is_number_unsigned())
      throw refuse("an added token " + dump(t) + " has no content or id");
    const std::string content = byte_mapped(t["content"].get<std::string>());  // the vocabulary's keys are byte-mapped
    if (f.vocab.contains(content) && f.vocab[content] != t["id"])
      throw refuse("its added token " + dump(t["content"]) + " has the id " + dump(t["id"]) + " and the vocabulary another");
    if (!f.vocab.contains(content)) f.vocab[content] = t["id"];
  }
  return f;
}

}  // namespace

bool is_byte_fallback_bpe(const nlohmann::json& j) {
  return j.is_object() && j.contains("model") && j["model"].is_object() && j["model"].value("byte_fallback", false) == true;
}

ByteLevelBpeFiles read_tokenizer_json(const std::string& path) { return read_tokenizer_json(parse_tokenizer_json(path, kTokenizerJsonHint), path); }

ByteLevelBpeFiles read_tokenizer_json(const nlohmann::json& parsed, const std::string& path) {
  try {
    return read_tokenizer_json_checked(parsed, path);
  } catch (const nlohmann::json::exception& e) {  // a field of another type than the format's
    throw UserError("tokenizer file '" + path + "': " + e.what() + "; a tokenizer.json as Hugging Face's tokenizers writes it is expected");
  }
}

}  // namespace dtrain
