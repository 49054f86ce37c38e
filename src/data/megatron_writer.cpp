// Megatron dataset writing: tokens streamed to PREFIX.bin, the index written at the end, both files
// renamed into place from temporaries so that a reader never sees a partial dataset.
#include "data/megatron_writer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <stdexcept>

#include "common/error.hpp"

namespace dtrain {

MegatronWriter::MegatronWriter(std::string prefix, int vocab_size, std::optional<MegatronDType> dtype)
    : prefix_(std::move(prefix)),
      bin_tmp_(prefix_ + ".bin.tmp." + std::to_string(::getpid())),
      idx_tmp_(prefix_ + ".idx.tmp." + std::to_string(::getpid())),
      vocab_size_(vocab_size),
      dtype_(dtype ? *dtype : vocab_size < 65500 ? MegatronDType::uint16 : MegatronDType::int32) {
  if (vocab_size <= 0) throw std::invalid_argument("MegatronWriter: vocab_size must be positive");
  bin_ = std::fopen(bin_tmp_.c_str(), "wb");
  if (!bin_) fail(prefix_ + ".bin", errno);
}

MegatronWriter::~MegatronWriter() {
  if (!finished_) remove_temporaries();
}

void MegatronWriter::remove_temporaries() {
  for (std::FILE** f : {&bin_, &idx_}) {
    if (*f) std::fclose(*f);
    *f = nullptr;
  }
  std::remove(bin_tmp_.c_str());
  std::remove(idx_tmp_.c_str());
}

void MegatronWriter::fail(const std::string& path, int err) {
  remove_temporaries();
  throw UserError("cannot write Megatron dataset file '" + path + "' (" + std::strerror(err) +
                  "); check that its directory exists, is writable and has space");
}

void MegatronWriter::write(std::FILE* f, const std::string& path, const void* bytes, std::size_t n) {
  if (n > 0 && std::fwrite(bytes, 1, n, f) != n) fail(path, errno);
}

void MegatronWriter::add_document(const std::vector<std::uint32_t>& tokens) {
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
  write(bin_, prefix_ + ".bin", bytes.data(), bytes.size());
  lengths_.push_back(static_cast<std::int32_t>(tokens.size()));
  num_tokens_ += tokens.size();
}

void MegatronWriter::finish() {
  close();
  publish();
}

void MegatronWriter::close() {
  const std::string bin_path = prefix_ + ".bin", idx_path = prefix_ + ".idx";
  const int closed = std::fclose(bin_);
  bin_ = nullptr;
  if (closed != 0) fail(bin_path, errno);
  idx_ = std::fopen(idx_tmp_.c_str(), "wb");
  if (!idx_) fail(idx_path, errno);
  const std::uint64_t sequences = lengths_.size(), document_indices = lengths_.size() + 1;
  const auto code = static_cast<std::uint8_t>(dtype_);
  const std::int64_t width = megatron_token_bytes(code);
  std::vector<std::int64_t> pointers(sequences), documents(document_indices);
  for (std::size_t i = 0; i < sequences; ++i) {
    pointers[i] = i == 0 ? 0 : pointers[i - 1] + lengths_[i - 1] * width;
    documents[i + 1] = static_cast<std::int64_t>(i + 1);
  }
  write(idx_, idx_path, kMegatronIndexMagic, sizeof kMegatronIndexMagic);
  write(idx_, idx_path, &kMegatronIndexVersion, 8);
  write(idx_, idx_path, &code, 1);
  write(idx_, idx_path, &sequences, 8);
  write(idx_, idx_path, &document_indices, 8);
  write(idx_, idx_path, lengths_.data(), lengths_.size() * 4);
  write(idx_, idx_path, pointers.data(), pointers.size() * 8);
  write(idx_, idx_path, documents.data(), documents.size() * 8);
  const int idx_closed = std::fclose(idx_);
  idx_ = nullptr;
  if (idx_closed != 0) fail(idx_path, errno);
  closed_ = true;
}

void MegatronWriter::publish() {
  if (!closed_) throw std::logic_error("MegatronWriter::publish before close");
  const std::string bin_path = prefix_ + ".bin", idx_path = prefix_ + ".idx";
  if (std::rename(bin_tmp_.c_str(), bin_path.c_str()) != 0) fail(bin_path, errno);
  if (std::rename(idx_tmp_.c_str(), idx_path.c_str()) != 0) fail(idx_path, errno);
  finished_ = true;
}

}  // namespace dtrain
