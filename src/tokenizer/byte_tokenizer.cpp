// ByteTokenizer: bytes to ids and back.
#include "tokenizer/byte_tokenizer.hpp"

#include "common/error.hpp"

namespace dtrain {

std::vector<std::uint32_t> ByteTokenizer::encode(const std::string& text) {
  std::vector<std::uint32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<std::uint32_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (std::uint32_t id : ids) {
    if (id >= 256) throw UserError("token id " + std::to_string(id) + " is not a byte (the byte tokenizer's vocabulary is 256)");
    text.push_back(static_cast<char>(id));
  }
  return text;
}

}  // namespace dtrain
