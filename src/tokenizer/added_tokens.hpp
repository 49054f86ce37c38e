// Added tokens that Hugging Face's tokenizers find in the text before anything else (tokenizer.json's
// "added_tokens" that are not special: Gemma's "\n" runs, tab runs and HTML tags): a byte trie matched
// leftmost-longest, as the library's aho-corasick matcher does. The text between matches goes on to the
// normaliser and the BPE. Special tokens are not matched: dtrain never makes them from text (a document
// that holds "<eos>" does not end there), they come by id.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

class AddedTokenMatcher {
 public:
  void add(const std::string& content, std::uint32_t id);
  // Calls on_text(std::string_view, bool at_start) for each stretch of text between matches (at_start:
  // it begins the text) and on_token(id) for each match, in order.
  template <class OnText, class OnToken>
  void split(std::string_view text, OnText&& on_text, OnToken&& on_token) const {
    std::size_t start = 0, i = 0;
    while (i < text.size()) {
      std::uint32_t id = 0;
      const std::size_t end = longest_match(text, i, id);
      if (end == i) {
        ++i;
        continue;
      }
      if (i > start) on_text(text.substr(start, i - start), start == 0);
      on_token(id);
      i = start = end;
    }
    if (start < text.size()) on_text(text.substr(start), start == 0);
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;
    std::int64_t id = -1;  // the token that ends here
  };
  // The end of the longest token that starts at `at` (`at` itself if none), its id in `id`.
  std::size_t longest_match(std::string_view text, std::size_t at, std::uint32_t& id) const;
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};  // some token starts with this byte: most positions are rejected at once
};

}  // namespace dtrain
