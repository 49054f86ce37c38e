// Opening the run's data: data.format, data.path (one prefix or a blend) and data.split make the
// DataBlend of one stream, every source opened and checked.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "config/config.hpp"
#include "data/data_blend.hpp"

namespace dtrain {

// The calling rank's share of a scan over tokens: part `index` of `count` equal parts.
struct ScanShare {
  int index = 0;
  int count = 1;
};

// The "train" or "val" stream; every problem is a UserError naming the file.
//   format=dtrain:   PREFIX.<stream>.bin of every blend part (TokenFile::open checks every token).
//   format=megatron: the part of every PREFIX's documents that data.split gives the stream (train the
//                    first, val the second); token ids are checked here, this call scanning its `share`
//                    of each source, so that the ranks of a job together read every token once.
// Each source must hold at least seq_length + 1 tokens. A loss mask beside a source (PREFIX.<stream>
// .lossmask.bin, or the Megatron dataset PREFIX.lossmask) is attached to it, checked against its tokens.
// tokenizer: the identity of data.tokenizer, which every dtrain token file must have been made with.
DataBlend open_data(const DataConfig& data, const std::string& tokenizer, const std::string& stream, int vocab_size, int seq_length,
                    ScanShare share);

// Documents [first, last) of part `part` (0 train, 1 valid, 2 test) when `num_documents` are cut by
// `split`: part k starts at round(num_documents x (weights before k) / (all weights)).
std::pair<std::uint64_t, std::uint64_t> split_documents(std::uint64_t num_documents, const DataSplit& split, int part);

}  // namespace dtrain
