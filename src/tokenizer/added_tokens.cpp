// AddedTokenMatcher: the trie and its longest match.
#include "tokenizer/added_tokens.hpp"

namespace dtrain {

void AddedTokenMatcher::add(const std::string& content, std::uint32_t id) {
  if (content.empty()) return;
  int node = 0;
  for (unsigned char c : content) {
    int next = -1;
    for (const auto& [byte, child] : nodes_[node].children)
      if (byte == c) next = child;
    if (next < 0) {
      next = static_cast<int>(nodes_.size());
      nodes_[node].children.emplace_back(c, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  nodes_[node].id = id;
  first_byte_[static_cast<unsigned char>(content[0])] = true;
}

std::size_t AddedTokenMatcher::longest_match(std::string_view text, std::size_t at, std::uint32_t& id) const {
  if (!first_byte_[static_cast<unsigned char>(text[at])]) return at;
  std::size_t end = at;
  int node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    int next = -1;
    for (const auto& [byte, child] : nodes_[node].children)
      if (byte == static_cast<unsigned char>(text[i])) next = child;
    if (next < 0) break;
    node = next;
    if (nodes_[node].id >= 0) end = i + 1, id = static_cast<std::uint32_t>(nodes_[node].id);
  }
  return end;
}

}  // namespace dtrain
