// MetaspaceBpeTokenizer: reading tokenizer.json's model, normalizer, pre-tokenizer, decoder and added
// tokens, checked against what is implemented; encoding and decoding.
#include "tokenizer/metaspace_bpe_tokenizer.hpp"

#include <unicode/utf8.h>

#include <algorithm>
#include <cstdio>

#include "common/error.hpp"

namespace dtrain {
namespace {

constexpr const char* kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr std::size_t kMetaBytes = 3;

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
std::string type_of(const nlohmann::json& j) { return j.is_object() ? j.value("type", std::string()) : std::string(); }
bool starts_with_meta(std::string_view s) { return s.compare(0, kMetaBytes, kMeta) == 0; }

// The steps of a Sequence (its `key` array), or the one step itself.
std::vector<nlohmann::json> steps(const nlohmann::json& j, const char* key) {
  if (type_of(j) != "Sequence") return {j};
  if (!j.contains(key) || !j[key].is_array()) return {nlohmann::json()};
  return {j[key].begin(), j[key].end()};
}

bool replaces_spaces(const nlohmann::json& j, const char* from, const char* to) {
  return type_of(j) == "Replace" && j.contains("pattern") && j["pattern"].is_object() && j["pattern"].value("String", std::string()) == from &&
         j.value("content", std::string()) == to;
}

// The code point of the UTF-8 character at s[i] (ICU's U8_NEXT), moving i past it; negative for bytes
// that are not UTF-8 (i then past the ill-formed run, whose bytes fall back one by one).
UChar32 next_code_point(std::string_view s, std::size_t& i) {
  auto at = static_cast<std::int32_t>(i);
  UChar32 c;
  U8_NEXT(s.data(), at, static_cast<std::int32_t>(s.size()), c);
  i = static_cast<std::size_t>(at);
  return c;
}

// The text with each "▁" a space.
std::string with_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t meta = std::min(s.find(kMeta, at), s.size());
    out.append(s.substr(at, meta - at));
    if (meta == s.size()) break;
    out += ' ';
    at = meta + kMetaBytes;
  }
  return out;
}

}  // namespace

MetaspaceBpeTokenizer::MetaspaceBpeTokenizer(const nlohmann::json& j, const std::string& path, std::string identity)
    : Tokenizer(std::move(identity)) {
  const std::string hint =
      "dtrain reads SentencePiece-style tokenizer.json files as transformers writes them for Llama 2, Mistral and Gemma";
  const auto refuse = [&](const std::string& what) { return UserError("tokenizer file '" + path + "': " + what + "; " + hint); };
  try {
    const nlohmann::json& m = j.at("model");
    if (type_of(m) != "BPE") throw refuse("its model is " + dump(m.value("type", nlohmann::json())) + ", not BPE");
    if (m.contains("dropout") && !m["dropout"].is_null()) throw refuse("its BPE model has a dropout, which dtrain does not implement");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(key) && !m[key].is_null() && m[key] != "") throw refuse(std::string("its BPE model has a ") + key);
    ignore_merges_ = m.value("ignore_merges", false);

    // Normalizer: Replace " " -> "▁" and Prepend "▁", in either order, or none.
    const nlohmann::json normalizer = j.value("normalizer", nlohmann::json());
    if (!normalizer.is_null())
      for (const nlohmann::json& step : steps(normalizer, "normalizers")) {
        if (replaces_spaces(step, " ", kMeta)) replace_spaces_ = true;
        else if (type_of(step) == "Prepend" && step.value("prepend", std::string()) == kMeta) prefix_ = Prefix::always;
        else throw refuse("its normalizer " + dump(normalizer) + " has the step " + dump(step) +
                          " (dtrain implements Replace \" \" with \"▁\" and Prepend \"▁\")");
      }
    // Pre-tokenizer: none, Gemma's Split on " " (merged with the previous piece), or Metaspace.
    const nlohmann::json pre = j.value("pre_tokenizer", nlohmann::json());
    if (type_of(pre) == "Split" && pre.contains("pattern") && pre["pattern"].is_object() &&
        pre["pattern"].value("String", std::string()) == " " && pre.value("behavior", std::string()) == "MergedWithPrevious" &&
        !pre.value("invert", false)) {
      split_ = Split::after_space;
    } else if (type_of(pre) == "Metaspace" && pre.value("replacement", std::string()) == kMeta) {
      const std::string scheme = pre.contains("prepend_scheme") ? pre.value("prepend_scheme", std::string())
                                 : pre.value("add_prefix_space", true) ? "always" : "never";
      if (scheme != "first" && scheme != "always" && scheme != "never") throw refuse("its Metaspace pre_tokenizer has the prepend_scheme " + dump(pre["prepend_scheme"]));
      if (prefix_ != Prefix::none && scheme != "never") throw refuse("both its normalizer and its Metaspace pre_tokenizer prepend \"▁\"");
      replace_spaces_ = true;
      if (scheme != "never") prefix_ = Prefix::unless_there, prefix_only_at_start_ = scheme == "first";
      if (pre.value("split", true)) split_ = Split::before_metaspace;
    } else if (!pre.is_null()) {
      throw refuse("its pre_tokenizer is " + dump(pre) + ", none of: none, Metaspace, a Split on \" \" merged with the previous piece");
    }
    // Decoder: Replace "▁" -> " ", ByteFallback, Fuse and a Strip of one leading space; or Metaspace's.
    const nlohmann::json decoder = j.value("decoder", nlohmann::json());
    if (!decoder.is_null())
      for (const nlohmann::json& step : steps(decoder, "decoders")) {
        const std::string t = type_of(step);
        if (replaces_spaces(step, kMeta, " ") || t == "ByteFallback" || t == "Fuse") continue;
        if (t == "Strip" && step.value("content", std::string()) == " " && step.value("stop", 0) == 0 && step.value("start", 0) <= 1) {
          strip_leading_space_ = step.value("start", 0) == 1;
          continue;
        }
        if (t == "Metaspace" && step.value("replacement", std::string()) == kMeta) {
          const bool prepends = step.contains("prepend_scheme") ? step["prepend_scheme"] != "never" : step.value("add_prefix_space", true);
          strip_leading_space_ = prepends;  // it turns "▁" into " " and drops the first token's leading one
          continue;
        }
        throw refuse("its decoder " + dump(decoder) + " has the step " + dump(step) +
                     " (dtrain implements Replace \"▁\" with \" \", ByteFallback, Fuse, a Strip of one leading space, Metaspace)");
      }
    // The vocabulary, then the added tokens: ids 0..n-1, each with one text (so no id reaches the
    // number of entries, which bounds the tables whatever ids the file claims).
    const nlohmann::json& vocab = m.at("vocab");
    if (!vocab.is_object() || vocab.empty()) throw refuse("its model has no vocab object");
    const nlohmann::json added = j.value("added_tokens", nlohmann::json::array());
    if (!added.is_array()) throw refuse("its added_tokens is not an array");
    const std::size_t entries = vocab.size() + added.size();
    std::vector<char> placed(entries, 0);
    text_of_.assign(entries, std::string());
    in_model_.assign(entries, 0);
    std::size_t size = 0;  // the largest id + 1
    const auto place = [&](const std::string& text, const nlohmann::json& id, bool in_model) {
      if (!id.is_number_unsigned() || id.get<std::uint64_t>() >= entries)
        throw refuse("the token " + dump(text) + " has the id " + dump(id) + ", not one of 0.." + std::to_string(entries - 1) +
                     " (the file has " + std::to_string(entries) + " vocabulary entries and added tokens)");
      const auto n = id.get<std::uint32_t>();
      if (placed[n]) {  // an added token that is also in the vocabulary, with the same id, is one token
        if (in_model || id_of_.count(text) == 0 || id_of_.at(text) != n)
          throw refuse("the id " + std::to_string(n) + " is given to " + dump(text) + " and to another token");
        return;
      }
      placed[n] = 1, in_model_[n] = in_model;
      text_of_[n] = with_spaces(text);
      id_of_.emplace(text, n);
      size = std::max<std::size_t>(size, n + 1);
    };
    for (const auto& [text, id] : vocab.items()) place(text, id, true);
    for (const nlohmann::json& t : added) {
      if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id"))
        throw refuse("an added token " + dump(t) + " has no content or id");
      const std::string content = t["content"].get<std::string>();
      if (id_of_.count(content) && id_of_.at(content) != t["id"])
        throw refuse("its added token " + dump(t["content"]) + " has the id " + dump(t["id"]) + " and the vocabulary another");
      place(content, t["id"], false);
      if (t.value("special", false)) continue;
      for (const char* flag : {"lstrip", "rstrip", "single_word", "normalized"})
        if (t.value(flag, false)) throw refuse("its added token " + dump(t) + " sets " + flag + ", which dtrain does not implement");
      added_.add(content, t["id"].get<std::uint32_t>());
    }
    for (std::size_t n = 0; n < size; ++n)
      if (!placed[n]) throw refuse("no token has the id " + std::to_string(n) + " (an entry is missing)");
    text_of_.resize(size), in_model_.resize(size);

    // Byte fallback: <0x00> .. <0xFF>, each decoding to its byte.
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const auto it = id_of_.find(name);
      if (it == id_of_.end() || !in_model_[it->second]) throw refuse(std::string("its vocabulary lacks the byte token ") + name + " that byte_fallback needs");
      byte_id_[b] = it->second;
      text_of_[it->second] = std::string(1, static_cast<char>(b));
    }
    for (const auto& [text, id] : id_of_) {  // the model's tokens of one character beyond ASCII
      std::size_t end = 0;
      const UChar32 c = text.size() > 1 && in_model_[id] ? next_code_point(text, end) : -1;
      if (c >= 0 && end == text.size()) char_id_.emplace(static_cast<char32_t>(c), id);
    }
    for (int c = 0; c < 128; ++c) {
      const auto it = id_of_.find(std::string(1, static_cast<char>(c)));
      ascii_id_[c] = it != id_of_.end() && in_model_[it->second] ? it->second : kNone;
    }

    const nlohmann::json& merges = m.at("merges");
    if (!merges.is_array()) throw refuse("its model has no merges array");
    for (const nlohmann::json& merge : merges) {
      std::string left, right;
      if (merge.is_string() && merge.get<std::string>().find(' ') != std::string::npos) {  // "LEFT RIGHT"
        const std::string s = merge.get<std::string>();
        left = s.substr(0, s.find(' ')), right = s.substr(s.find(' ') + 1);
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
        left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
      } else {
        throw refuse("its merges hold " + dump(merge) + ", not a pair of tokens");
      }
      const auto l = id_of_.find(left), r = id_of_.find(right), both = id_of_.find(left + right);
      if (l == id_of_.end() || r == id_of_.end() || both == id_of_.end())
        throw refuse("its merge " + dump(merge) + " joins tokens the vocabulary lacks");
      merges_.add(l->second, r->second, both->second);
    }
  } catch (const nlohmann::json::exception& e) {  // a field of another type than the format's
    throw refuse(std::string("a field is not as the format has it (") + e.what() + ")");
  }
}

std::string MetaspaceBpeTokenizer::normalize(std::string_view stretch, bool starts_text, bool continues) const {
  std::string s;
  s.reserve(stretch.size() + stretch.size() / 4 + kMetaBytes);
  if (prefix_ == Prefix::always && !continues && !stretch.empty()) s = kMeta;
  for (char c : stretch)
    if (c == ' ' && replace_spaces_) s += kMeta;
    else s += c;
  if (prefix_ == Prefix::unless_there && !continues && (!prefix_only_at_start_ || starts_text) && !starts_with_meta(s)) s.insert(0, kMeta);
  return s;
}

void MetaspaceBpeTokenizer::encode_word(std::string_view word, std::vector<std::uint32_t>& ids) const {
  if (ignore_merges_)
    if (const auto whole = id_of_.find(std::string(word)); whole != id_of_.end() && in_model_[whole->second]) {
      ids.push_back(whole->second);
      return;
    }
  std::vector<std::uint32_t> symbols;
  symbols.reserve(word.size());
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t start = i;
    const auto lead = static_cast<unsigned char>(word[i]);
    std::uint32_t id = kNone;
    if (lead < 0x80) {
      id = ascii_id_[lead];
      ++i;
    } else if (const UChar32 c = next_code_point(word, i); c >= 0) {
      if (const auto it = char_id_.find(static_cast<char32_t>(c)); it != char_id_.end()) id = it->second;
    }
    if (id != kNone) symbols.push_back(id);
    else
      for (std::size_t k = start; k < i; ++k) symbols.push_back(byte_id_[static_cast<unsigned char>(word[k])]);
  }
  const std::vector<std::uint32_t> merged = merges_.merge(std::move(symbols));
  ids.insert(ids.end(), merged.begin(), merged.end());
}

void MetaspaceBpeTokenizer::encode_text(const std::string& text, bool continues, std::vector<std::uint32_t>& ids) const {
  const auto on_stretch = [&](std::string_view stretch, bool at_start) {
    const std::string s = normalize(stretch, at_start, continues && at_start);
    std::string_view rest = s;
    while (!rest.empty()) {  // the words of step 3
      std::size_t end = std::string_view::npos;
      if (split_ == Split::after_space) {
        end = rest.find(' ');
        if (end != std::string_view::npos) ++end;
      } else if (split_ == Split::before_metaspace) {
        end = rest.find(kMeta, starts_with_meta(rest) ? kMetaBytes : 0);
      }
      end = std::min(end, rest.size());
      encode_word(rest.substr(0, end), ids);
      rest.remove_prefix(end);
    }
  };
  added_.split(text, on_stretch, [&](std::uint32_t id) { ids.push_back(id); });
}

std::vector<std::uint32_t> MetaspaceBpeTokenizer::encode(const std::string& text) {
  std::vector<std::uint32_t> ids;
  encode_text(text, false, ids);
  return ids;
}

std::vector<std::uint32_t> MetaspaceBpeTokenizer::encode_continuation(const std::string& text) {
  std::vector<std::uint32_t> ids;
  encode_text(text, true, ids);
  return ids;
}

std::string MetaspaceBpeTokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  std::string text;
  for (std::uint32_t id : ids) {
    if (id >= text_of_.size())
      throw UserError("token id " + std::to_string(id) + " is not in the tokenizer's vocabulary of " + std::to_string(text_of_.size()));
    text += text_of_[id];
  }
  if (strip_leading_space_ && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

std::string MetaspaceBpeTokenizer::normalized(const std::string& text) const {
  std::string out;
  added_.split(
      text, [&](std::string_view stretch, bool at_start) { out += with_spaces(normalize(stretch, at_start, false)); },
      [&](std::uint32_t id) { out += text_of_[id]; });
  if (strip_leading_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

std::optional<std::uint32_t> MetaspaceBpeTokenizer::token_id(const std::string& text) const {
  const auto it = id_of_.find(text);
  if (it == id_of_.end()) return std::nullopt;
  return it->second;
}

}  // namespace dtrain
