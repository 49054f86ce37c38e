// BPE merging by rank, shared by the byte-level (GPT-2, Llama 3, Qwen) and the SentencePiece-style
// (Llama 2, Mistral, Gemma) tokenizers: a table of merges over token ids and the merge of one word's
// symbols, lowest rank first and, for one rank, left to right, as GPT-2's loop and Hugging Face's
// Word::merge_all do.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace dtrain {

class BpeMerges {
 public:
  // Adds the merge of `left` then `right` into `merged`, ranked after every merge added before it.
  void add(std::uint32_t left, std::uint32_t right, std::uint32_t merged) { table_.emplace(key(left, right), Merge{rank_++, merged}); }
  bool empty() const { return table_.empty(); }
  // The word's symbols merged until no adjacent pair has a merge.
  std::vector<std::uint32_t> merge(std::vector<std::uint32_t> symbols) const;

 private:
  struct Merge {
    std::uint32_t rank;
    std::uint32_t id;  // the merged token
  };
  static std::uint64_t key(std::uint32_t left, std::uint32_t right) { return (std::uint64_t{left} << 32) | right; }
  std::unordered_map<std::uint64_t, Merge> table_;
  std::uint32_t rank_ = 0;
};

}  // namespace dtrain
