// Megatron dataset writing: tokens streamed to PREFIX.bin, the index written at the end, both files
// staged and published (common/staged_file) so that a reader never sees a partial dataset.
#include "data/megatron_writer.hpp"

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <stdexcept>

#include "common/error.hpp"

namespace dtrain {

MegatronWriter::MegatronWriter(std::string prefix, int vocab_size, std::optional<MegatronDType> dtype)
    : prefix_(std::move(prefix)),
      vocab_size_(vocab_size),
      dtype_(dtype ? *dtype : vocab_size < 65500 ? MegatronDType::uint16 : MegatronDType::int32) {
  if (vocab_size <= 0) throw std::invalid_argument("MegatronWriter: vocab_size must be positive");
  bin_ = std::make_unique<StagedFile>(prefix_ + ".bin", "Megatron dataset file");
}

void MegatronWriter::add_document(const std::vector<std::uint32_t>& tokens) {
  if (closed_) throw std::logic_error("MegatronWriter::add_document after close");
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::invalid_argument("MegatronWriter: a document of " + std::to_string(tokens.size()) +
                                " tokens is longer than a Megatron sequence (int32) can be");
  }
  const std::uint32_t width = megatron_token_bytes(static_cast<std::uint8_t>(dtype_));
  std::vector<std::uint8_t> bytes(tokens.size() * width);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= static_cast<std::uint32_t>(vocab_size_)) {
      throw std::invalid_argument("MegatronWriter: token id " + std::to_string(tokens[i]) + " is not below vocab_size " +
                                  std::to_string(vocab_size_));
    }
    const std::uint8_t byte = static_cast<std::uint8_t>(tokens[i]);
    const std::uint16_t narrow = static_cast<std::uint16_t>(tokens[i]);
    const std::int32_t wide = static_cast<std::int32_t>(tokens[i]);
    std::memcpy(bytes.data() + i * width, width == 1 ? static_cast<const void*>(&byte) : width == 2 ? static_cast<const void*>(&narrow) : &wide,
                width);
  }
  bin_->write(bytes.data(), bytes.size());
  lengths_.push_back(static_cast<std::int32_t>(tokens.size()));
  num_tokens_ += tokens.size();
}

void MegatronWriter::finish() {
  close();
  publish();
}

void MegatronWriter::close() {
  if (closed_) return;
  bin_->finish();
  idx_ = std::make_unique<StagedFile>(prefix_ + ".idx", "Megatron dataset index");
  const std::uint64_t sequences = lengths_.size(), document_indices = lengths_.size() + 1;
  const auto code = static_cast<std::uint8_t>(dtype_);
  const std::int64_t width = megatron_token_bytes(code);
  std::vector<std::int64_t> pointers(sequences), documents(document_indices);
  for (std::size_t i = 0; i < sequences; ++i) {
    pointers[i] = i == 0 ? 0 : pointers[i - 1] + lengths_[i - 1] * width;
    documents[i + 1] = static_cast<std::int64_t>(i + 1);
  }
  idx_->write(kMegatronIndexMagic, sizeof kMegatronIndexMagic);
  idx_->write(&kMegatronIndexVersion, 8);
  idx_->write(&code, 1);
  idx_->write(&sequences, 8);
  idx_->write(&document_indices, 8);
  idx_->write(lengths_.data(), lengths_.size() * 4);
  idx_->write(pointers.data(), pointers.size() * 8);
  idx_->write(documents.data(), documents.size() * 8);
  idx_->finish();
  closed_ = true;
}

void MegatronWriter::publish() {
  if (!closed_) throw std::logic_error("MegatronWriter::publish before close");
  publish_together({bin_.get(), idx_.get()});
}

}  // namespace dtrain
