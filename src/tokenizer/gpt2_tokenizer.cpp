// Gpt2Tokenizer: the vocabulary and merges through GPT-2's byte-to-unicode map, BPE merges by rank over
// token ids, and decoding.
#include "tokenizer/gpt2_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "tokenizer/gpt2_pretokenize.hpp"
#include "tokenizer/unicode_normalize.hpp"

namespace dtrain {
namespace {

// GPT-2's byte-to-unicode map inverted: code point -> byte.
std::unordered_map<char32_t, std::uint8_t> unicode_to_byte() {
  std::unordered_map<char32_t, std::uint8_t> out;
  for (int b = 0; b < 256; ++b) out[gpt2_byte_unicode(static_cast<unsigned char>(b))] = static_cast<std::uint8_t>(b);
  return out;
}

// The bytes a token's mapped text stands for; false if it is not valid UTF-8 of mapped code points.
bool unmap_token(const std::string& mapped, const std::unordered_map<char32_t, std::uint8_t>& to_byte, std::string& bytes) {
  bytes.clear();
  for (std::size_t i = 0; i < mapped.size();) {
    const auto c = static_cast<unsigned char>(mapped[i]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : 0;  // the map's code points are below U+0800
    if (len == 0 || i + len > mapped.size()) return false;
    const char32_t cp = len == 1 ? c : ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(mapped[i + 1]) & 0x3Fu);
    const auto it = to_byte.find(cp);
    if (it == to_byte.end()) return false;
    bytes.push_back(static_cast<char>(it->second));
    i += len;
  }
  return !bytes.empty();
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const ByteLevelBpeFiles& files, std::string identity)
    : Tokenizer(std::move(identity)), split_(files.split), nfc_(files.nfc), ignore_merges_(files.ignore_merges) {
  load_vocab(files);
  load_merges(files);
}

void Gpt2Tokenizer::load_vocab(const ByteLevelBpeFiles& files) {
  const auto bad = [&](const std::string& what) { return UserError("tokenizer file '" + files.vocab_file + "' " + what + "; " + files.hint); };
  const nlohmann::json& json = files.vocab;
  if (!json.is_object() || json.empty()) throw bad("is not a JSON object of token -> id");
  // The ids must be 0 .. size-1, each once: a missing entry shows as the id nobody has, not as the
  // largest id (<|endoftext|> in GPT-2's file) being out of range.
  std::vector<bool> taken(json.size(), false);
  for (const auto& [token, id] : json.items()) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > (1u << 30))
      throw bad("maps '" + token + "' to " + id.dump() + ", which is not a token id");
    const auto n = id.get<std::uint64_t>();
    if (n < taken.size()) taken[n] = true;
  }
  for (std::size_t n = 0; n < taken.size(); ++n)
    if (!taken[n])
      throw bad("has " + std::to_string(json.size()) + " entries, but no token has the id " + std::to_string(n) +
                " (an entry is missing, or an id is given twice)");
  const auto to_byte = unicode_to_byte();
  token_bytes_.assign(json.size(), std::string());
  std::string bytes;
  for (const auto& [token, id] : json.items()) {
    if (!unmap_token(token, to_byte, bytes)) throw bad("holds the token '" + token + "', which is not GPT-2 byte-mapped text");
    const auto n = id.get<std::uint32_t>();  // in [0, size), each id once (checked above)
    token_bytes_[n] = bytes;
    id_of_.emplace(bytes, n);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of_.find(std::string(1, static_cast<char>(b)));
    if (it == id_of_.end()) throw bad("has no token for the byte " + std::to_string(b));
    byte_id_[b] = it->second;
  }
}

void Gpt2Tokenizer::load_merges(const ByteLevelBpeFiles& files) {
  const auto bad = [&](const std::string& what) { return UserError("tokenizer file '" + files.merges_file + "' " + what + "; " + files.hint); };
  const auto where = [&](std::size_t number) {
    return files.first_merge_line > 0 ? "line " + std::to_string(files.first_merge_line + number) : "merge " + std::to_string(number + 1);
  };
  const auto to_byte = unicode_to_byte();
  std::string left, right, a, b;
  for (std::size_t number = 0; number < files.merges.size(); ++number) {
    const std::string& line = files.merges[number];
    std::istringstream fields(line);
    if (!(fields >> left)) continue;
    if (!(fields >> right) || !unmap_token(left, to_byte, a) || !unmap_token(right, to_byte, b))
      throw bad(where(number) + " ('" + line + "') is not a merge 'LEFT RIGHT'");
    const auto l = id_of_.find(a), r = id_of_.find(b), m = id_of_.find(a + b);
    if (l == id_of_.end() || r == id_of_.end() || m == id_of_.end())
      throw bad(where(number) + " ('" + line + "') merges tokens the vocabulary (" + files.vocab_file +
                ") lacks; the two do not belong together");
    merges_.add(l->second, r->second, m->second);
  }
  if (merges_.empty()) throw bad("holds no merges (GPT-2's has 50000)");
}

std::vector<std::uint32_t> Gpt2Tokenizer::bpe(std::string_view piece) const {
  if (ignore_merges_)
    if (const auto whole = id_of_.find(std::string(piece)); whole != id_of_.end()) return {whole->second};
  std::vector<std::uint32_t> id(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) id[i] = byte_id_[static_cast<unsigned char>(piece[i])];
  return merges_.merge(std::move(id));
}

std::optional<std::uint32_t> Gpt2Tokenizer::token_id(const std::string& text) const {
  const auto it = id_of_.find(text);
  if (it == id_of_.end()) return std::nullopt;
  return it->second;
}

std::string Gpt2Tokenizer::normalized(const std::string& text) const { return nfc_ ? nfc_utf8(text) : text; }

std::vector<std::uint32_t> Gpt2Tokenizer::encode(const std::string& raw) {
  const std::string normalized = nfc_ ? nfc_utf8(raw) : std::string();
  const std::string& text = nfc_ ? normalized : raw;
  std::vector<std::uint32_t> ids;
  ids.reserve(text.size() / 3);
  std::string key;
  const auto encode_piece = [&](std::string_view piece) {
    key.assign(piece.data(), piece.size());
    if (piece.size() > kLongestCachedPiece) {  // a long piece (base64, minified text) seldom repeats
      const std::vector<std::uint32_t> word = bpe(piece);
      ids.insert(ids.end(), word.begin(), word.end());
      return;
    }
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      // A corpus of many distinct pieces: memory stays bounded (at most kCachedPieces short pieces).
      if (cache_.size() >= kCachedPieces) cache_.clear();
      it = cache_.emplace(key, bpe(piece)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  };
  switch (split_) {
    case ByteLevelBpeFiles::Split::gpt2: gpt2_pretokenize(text, encode_piece); break;
    case ByteLevelBpeFiles::Split::llama3: llama3_pretokenize(text, encode_piece); break;
    case ByteLevelBpeFiles::Split::qwen2: qwen2_pretokenize(text, encode_piece); break;
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  std::string text;
  for (std::uint32_t id : ids) {
    if (id >= token_bytes_.size())
      throw UserError("token id " + std::to_string(id) + " is not in the gpt2 vocabulary of " + std::to_string(token_bytes_.size()));
    text += token_bytes_[id];
  }
  return text;
}

}  // namespace dtrain
