// MegatronWriter: writes a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx, layout in
// megatron_dataset.hpp) document by document, as Megatron's IndexedDatasetBuilder does: one sequence per
// document, tokens as uint16 below a vocabulary of 65500 and int32 above (Megatron's optimal dtype).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/staged_file.hpp"
#include "data/megatron_dataset.hpp"

namespace dtrain {

class MegatronWriter {
 public:
  // Starts PREFIX.bin (staged: common/staged_file); UserError naming the file when it cannot be created.
  // The token dtype is Megatron's choice for the vocabulary (uint16 below 65500, else int32) unless given.
  MegatronWriter(std::string prefix, int vocab_size, std::optional<MegatronDType> dtype = std::nullopt);
  // An unfinished writer removes its temporary files (the staged files' destructors).
  MegatronWriter(const MegatronWriter&) = delete;
  MegatronWriter& operator=(const MegatronWriter&) = delete;

  // Appends one document; every token must be below vocab_size (std::invalid_argument otherwise).
  void add_document(const std::vector<std::uint32_t>& tokens);
  // Writes PREFIX.idx and publishes both files, PREFIX.bin first, both or neither; UserError on a write error.
  void finish();
  // The same in two steps, so that several datasets appear together: close() writes, syncs and closes
  // both temporaries, publish() renames them (a closed writer destroyed unpublished removes them).
  // files() are the two, for a caller that publishes them together with others.
  void close();
  void publish();
  std::vector<StagedFile*> files() const { return {bin_.get(), idx_.get()}; }

  MegatronDType dtype() const { return dtype_; }
  std::uint64_t num_tokens() const { return num_tokens_; }
  std::uint64_t num_documents() const { return lengths_.size(); }

 private:
  std::string prefix_;
  int vocab_size_;
  MegatronDType dtype_;
  std::unique_ptr<StagedFile> bin_, idx_;
  std::vector<std::int32_t> lengths_;  // tokens per sequence (= document)
  std::uint64_t num_tokens_ = 0;
  bool closed_ = false;
};

}  // namespace dtrain
