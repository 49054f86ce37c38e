// Best-fit packing of a token stream's documents into samples (data.pack): documents end with the
// end-of-document token (dtrain-data --sft ends every record with it; --append-eod every pretraining
// document), and each sample window of seq_length + 1 tokens holds whole documents, the rest padded
// with end-of-document tokens whose targets are masked, so that no conversation is cut across two
// samples. Documents are placed longest first, each into the fullest bin it fits (best fit decreasing,
// ties to the earlier bin), a new bin when none has room; a document longer than a window fills whole
// windows with its first pieces and is packed with its rest (Megatron's samples cut long documents
// too). A pure function of the tokens: every rank, layout and resume gets the same bins.
#pragma once
#include <cstdint>
#include <vector>

#include "data/token_source.hpp"

namespace dtrain {

class PackedDocuments {
 public:
  // Scans the whole stream once for the documents. capacity = seq_length + 1 (a sample's window).
  PackedDocuments(const TokenSource& source, int eod, int capacity);

  std::uint64_t num_bins() const { return bin_begin_.size() - 1; }
  std::uint64_t num_documents() const { return documents_; }
  // Share of the bins' tokens that are padding (for the start-up log).
  double padding() const;
  // Bin b as one window: tokens (capacity) and their loss mask bytes (the source's, 0 for padding).
  void read(std::uint64_t b, int* tokens, std::uint8_t* mask) const;

 private:
  struct Piece {
    std::uint64_t start;
    std::uint32_t length;
  };
  const TokenSource& source_;
  int eod_, capacity_;
  std::uint64_t documents_ = 0, tokens_ = 0;
  std::vector<Piece> pieces_;                // bin by bin
  std::vector<std::uint64_t> bin_begin_{0};  // bin b is pieces_[bin_begin_[b], bin_begin_[b + 1])
};

}  // namespace dtrain
