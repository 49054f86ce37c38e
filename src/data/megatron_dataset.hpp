// Megatron-LM's indexed dataset (PREFIX.bin + PREFIX.idx, megatron/core/datasets/indexed_dataset.py),
// read in place through mmap: the on-disk layout, and the validated reader whose token stream is the
// concatenation of its documents (or of a range of them: a data.split part), as Megatron's GPTDataset
// sees it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/mapped_file.hpp"
#include "data/token_source.hpp"

namespace dtrain {

// PREFIX.idx, version 1, little-endian (S sequences, D document indices):
//   offset 0   char[9]   magic "MMIDIDX\0\0"
//   offset 9   uint64    version, 1
//   offset 17  uint8     dtype code of the tokens in PREFIX.bin (MegatronDType)
//   offset 18  uint64    S
//   offset 26  uint64    D = documents + 1
//   offset 34  int32[S]  sequence lengths, in tokens
//              int64[S]  sequence pointers: byte offset of each sequence in PREFIX.bin
//              int64[D]  document indices: document i is sequences [doc[i], doc[i+1]); doc[0] = 0
//              (a multimodal dataset appends int8[S] sequence modes; dtrain ignores them)
// PREFIX.bin: the tokens of every sequence, packed in the dtype, at the sequence's pointer.
constexpr char kMegatronIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::uint64_t kMegatronIndexVersion = 1;
constexpr std::size_t kMegatronIndexHeaderBytes = 34;

// Megatron's DType codes. dtrain reads (and writes) uint8, uint16 and int32 tokens.
enum class MegatronDType : std::uint8_t { uint8 = 1, int8, int16, int32, int64, float64, float32, uint16 };

// Bytes per token of a dtype dtrain reads; 0 for the others.
std::uint32_t megatron_token_bytes(std::uint8_t code);

class MegatronDataset : public TokenSource {
 public:
  // Maps PREFIX.idx and PREFIX.bin and checks the index: magic, version, dtype, that the file holds the
  // arrays its header declares, document indices in order, and every sequence inside PREFIX.bin. Every
  // problem is a UserError naming the file and the fix. Token ids are not read here (check_tokens).
  static MegatronDataset open(const std::string& prefix);

  std::uint64_t num_documents() const { return num_documents_; }
  // Restricts the token stream to documents [first, last) (initially all of them).
  void keep_documents(std::uint64_t first, std::uint64_t last);

  std::uint64_t size() const override { return end_ - begin_; }
  void read(std::uint64_t start, int len, int* out /*(len)*/) const override;
  // UserError naming PREFIX.bin at the first token among [begin, end) of the stream that is negative or
  // not below vocab_size (model.vocab_size), or whose loss mask value is not 0 or 1.
  void check_tokens(int vocab_size, std::uint64_t begin, std::uint64_t end) const;
  // The loss mask: the Megatron dataset MASK_PREFIX (PREFIX.lossmask.bin + .idx, uint8 values 0/1,
  // written by dtrain-data --sft), which must have exactly this dataset's sequences and documents; a
  // UserError naming both otherwise. Call before keep_documents.
  void attach_loss_mask(const std::string& mask_prefix);
  bool has_loss_mask() const override { return mask_ != nullptr; }
  void read_loss_mask(std::uint64_t start, int len, std::uint8_t* out) const override;

  MegatronDType dtype() const { return dtype_; }

 private:
  MegatronDataset(MappedFile idx, MappedFile bin);
  void check_index();
  std::uint64_t document_index(std::uint64_t i) const;  // doc[i]
  std::uint64_t document_start(std::uint64_t doc) const;  // stream offset of document doc among all documents

  MappedFile idx_, bin_;
  MegatronDType dtype_ = MegatronDType::uint16;
  std::uint32_t token_bytes_ = 0;
  std::uint64_t num_sequences_ = 0, num_documents_ = 0;
  std::uint64_t pointers_at_ = 0, documents_at_ = 0;  // byte offsets of the arrays in PREFIX.idx
  // Stream offset of each sequence of the documents (doc[0] + i), and the total at the end.
  std::vector<std::uint64_t> sequence_start_;
  std::uint64_t begin_ = 0, end_ = 0;  // the kept documents' part of the stream
  std::unique_ptr<MegatronDataset> mask_;  // the loss mask dataset, same sequences, when attached
};

// The loss mask dataset's prefix for the Megatron dataset PREFIX: PREFIX.lossmask.
std::string megatron_loss_mask_prefix(const std::string& prefix);

}  // namespace dtrain
