// Megatron indexed dataset reader: index validation at open, token reads across sequence boundaries
// straight from the mapped PREFIX.bin.
#include "data/megatron_dataset.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "common/error.hpp"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the Megatron dataset reader maps little-endian files directly; it needs a little-endian host"
#endif

namespace dtrain {
namespace {

constexpr const char* kRemake = "re-create it (Megatron's tools/preprocess_data.py, or dtrain-data --format megatron)";

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string quoted(const std::string& path) { return "Megatron dataset file '" + path + "'"; }

const char* dtype_name(std::uint8_t code) {
  static const char* const names[] = {"uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
  return code >= 1 && code <= 8 ? names[code - 1] : "unknown";
}

}  // namespace

std::uint32_t megatron_token_bytes(std::uint8_t code) {
  switch (static_cast<MegatronDType>(code)) {
    case MegatronDType::uint8: return 1;
    case MegatronDType::uint16: return 2;
    case MegatronDType::int32: return 4;
    default: return 0;
  }
}

MegatronDataset::MegatronDataset(MappedFile idx, MappedFile bin) : idx_(std::move(idx)), bin_(std::move(bin)) {}

MegatronDataset MegatronDataset::open(const std::string& prefix) {
  MappedFile idx(prefix + ".idx", "Megatron index");  // the index first: its errors come first
  MegatronDataset d(std::move(idx), MappedFile(prefix + ".bin", "Megatron data file"));
  d.check_index();
  d.keep_documents(0, d.num_documents_);
  return d;
}

void MegatronDataset::check_index() {
  const std::string idx = quoted(idx_.path());
  const std::uint64_t bytes = idx_.size();
  const std::uint8_t* p = idx_.data();
  if (bytes < kMegatronIndexHeaderBytes) {
    throw UserError(idx + " is truncated: " + std::to_string(bytes) + " bytes, shorter than the " +
                    std::to_string(kMegatronIndexHeaderBytes) + "-byte header; " + kRemake);
  }
  if (std::memcmp(p, kMegatronIndexMagic, sizeof kMegatronIndexMagic) != 0) {
    throw UserError(idx + " is not a Megatron index (it does not start with \"MMIDIDX\\0\\0\"); " + kRemake +
                    ", or set data.format=dtrain for dtrain token files");
  }
  const auto version = load<std::uint64_t>(p + 9);
  if (version != kMegatronIndexVersion) {
    throw UserError(idx + " has index version " + std::to_string(version) + ", but dtrain reads version " +
                    std::to_string(kMegatronIndexVersion) + "; " + kRemake);
  }
  const std::uint8_t code = p[17];
  token_bytes_ = megatron_token_bytes(code);
  if (token_bytes_ == 0) {
    throw UserError(idx + " stores " + dtype_name(code) + " tokens (dtype code " + std::to_string(code) +
                    "), but dtrain reads token ids stored as uint8, uint16 or int32; " + kRemake);
  }
  dtype_ = static_cast<MegatronDType>(code);
  num_sequences_ = load<std::uint64_t>(p + 18);
  const auto doc_indices = load<std::uint64_t>(p + 26);
  const std::uint64_t room = bytes - kMegatronIndexHeaderBytes;
  if (num_sequences_ > room / 12 || doc_indices > (room - num_sequences_ * 12) / 8) {
    throw UserError(idx + " is truncated: its header declares " + std::to_string(num_sequences_) + " sequences and " +
                    std::to_string(doc_indices) + " document indices, more than its " + std::to_string(bytes) +
                    " bytes hold; " + kRemake);
  }
  const std::uint64_t after = room - num_sequences_ * 12 - doc_indices * 8;  // bytes past the declared arrays
  if (after != 0) {
    throw UserError(idx + " holds " + std::to_string(after) + " bytes after the arrays its header declares (" +
                    std::to_string(num_sequences_) + " sequences, " + std::to_string(doc_indices) +
                    " document indices); the header and the arrays disagree, " + kRemake);
  }
  if (doc_indices == 0) throw UserError(idx + " has no document indices (it needs at least the leading 0); " + kRemake);
  num_documents_ = doc_indices - 1;
  pointers_at_ = kMegatronIndexHeaderBytes + 4 * num_sequences_;
  documents_at_ = pointers_at_ + 8 * num_sequences_;
  for (std::uint64_t i = 0; i < doc_indices; ++i) {
    const auto at = load<std::int64_t>(p + documents_at_ + 8 * i);
    const auto before = i == 0 ? std::int64_t{0} : load<std::int64_t>(p + documents_at_ + 8 * (i - 1));
    if (at < before || static_cast<std::uint64_t>(at) > num_sequences_) {
      throw UserError(idx + " has document index " + std::to_string(i) + " = " + std::to_string(at) +
                      ", out of order or beyond its " + std::to_string(num_sequences_) + " sequences; the index is corrupt, " +
                      kRemake);
    }
  }
  const std::uint64_t first = document_index(0), last = document_index(num_documents_);
  sequence_start_.assign(last - first + 1, 0);
  for (std::uint64_t s = first; s < last; ++s) {
    const auto len = load<std::int32_t>(p + kMegatronIndexHeaderBytes + 4 * s);
    const auto ptr = load<std::int64_t>(p + pointers_at_ + 8 * s);
    const std::uint64_t need = static_cast<std::uint64_t>(len) * token_bytes_;
    if (len < 0 || ptr < 0 || static_cast<std::uint64_t>(ptr) > bin_.size() || need > bin_.size() - static_cast<std::uint64_t>(ptr)) {
      throw UserError(quoted(bin_.path()) + " is shorter than its index says: sequence " + std::to_string(s) + " is " +
                      std::to_string(len) + " tokens at byte " + std::to_string(ptr) + ", but the file has " +
                      std::to_string(bin_.size()) + " bytes; the .bin and .idx do not belong together or the .bin is "
                      "truncated, " + kRemake);
    }
    sequence_start_[s - first + 1] = sequence_start_[s - first] + static_cast<std::uint64_t>(len);
  }
}

std::uint64_t MegatronDataset::document_index(std::uint64_t i) const {
  return static_cast<std::uint64_t>(load<std::int64_t>(idx_.data() + documents_at_ + 8 * i));
}

std::uint64_t MegatronDataset::document_start(std::uint64_t doc) const {
  return sequence_start_[document_index(doc) - document_index(0)];
}

void MegatronDataset::keep_documents(std::uint64_t first, std::uint64_t last) {
  if (first > last || last > num_documents_) {
    throw std::out_of_range("MegatronDataset::keep_documents: [" + std::to_string(first) + ", " + std::to_string(last) +
                            ") is not a range of the " + std::to_string(num_documents_) + " documents");
  }
  begin_ = document_start(first);
  end_ = document_start(last);
  if (mask_) mask_->keep_documents(first, last);
}

void MegatronDataset::read(std::uint64_t start, int len, int* out) const {
  if (len < 0 || start > size() || static_cast<std::uint64_t>(len) > size() - start) {
    throw std::out_of_range("MegatronDataset::read: tokens [" + std::to_string(start) + ", +" + std::to_string(len) +
                            ") past the end of a stream of " + std::to_string(size()) + " tokens");
  }
  std::uint64_t pos = begin_ + start;
  // The sequence holding pos: the last one starting at or before it (empty sequences are skipped).
  std::size_t s = static_cast<std::size_t>(std::upper_bound(sequence_start_.begin(), sequence_start_.end(), pos) -
                                           sequence_start_.begin()) - 1;
  const std::uint64_t first_sequence = document_index(0);
  for (int done = 0; done < len; ++s) {
    const std::uint64_t offset = pos - sequence_start_[s];
    const int n = static_cast<int>(std::min<std::uint64_t>(sequence_start_[s + 1] - pos, static_cast<std::uint64_t>(len - done)));
    const std::uint8_t* src = bin_.data() + load<std::int64_t>(idx_.data() + pointers_at_ + 8 * (first_sequence + s)) +
                              offset * token_bytes_;
    for (int t = 0; t < n; ++t) {
      switch (dtype_) {
        case MegatronDType::uint8: out[done + t] = src[t]; break;
        case MegatronDType::uint16: out[done + t] = load<std::uint16_t>(src + 2 * t); break;
        default: out[done + t] = load<std::int32_t>(src + 4 * t); break;
      }
    }
    done += n;
    pos += static_cast<std::uint64_t>(n);
  }
}

std::string megatron_loss_mask_prefix(const std::string& prefix) { return prefix + ".lossmask"; }

void MegatronDataset::attach_loss_mask(const std::string& mask_prefix) {
  auto mask = std::make_unique<MegatronDataset>(open(mask_prefix));
  const std::string both = quoted(mask->idx_.path()) + " is not the loss mask of " + quoted(idx_.path());
  if (mask->dtype_ != MegatronDType::uint8)
    throw UserError(quoted(mask->idx_.path()) + " stores " + dtype_name(static_cast<std::uint8_t>(mask->dtype_)) +
                    " values, but a loss mask is uint8 0/1; re-make both with dtrain-data --sft --format megatron");
  if (mask->num_sequences_ != num_sequences_ || mask->num_documents_ != num_documents_)
    throw UserError(both + ": it has " + std::to_string(mask->num_sequences_) + " sequences in " + std::to_string(mask->num_documents_) +
                    " documents, the tokens " + std::to_string(num_sequences_) + " in " + std::to_string(num_documents_) +
                    "; re-make both with dtrain-data --sft --format megatron");
  // Every sequence length and document index must agree: then the two streams align token for token.
  const std::uint8_t* a = idx_.data() + kMegatronIndexHeaderBytes;
  const std::uint8_t* b = mask->idx_.data() + kMegatronIndexHeaderBytes;
  if (std::memcmp(a, b, 4 * num_sequences_) != 0 ||
      std::memcmp(idx_.data() + documents_at_, mask->idx_.data() + mask->documents_at_, 8 * (num_documents_ + 1)) != 0)
    throw UserError(both + ": their sequence lengths or document indices differ (the mask belongs to other tokens); re-make both "
                    "with dtrain-data --sft --format megatron");
  mask_ = std::move(mask);
}

void MegatronDataset::read_loss_mask(std::uint64_t start, int len, std::uint8_t* out) const {
  if (!mask_) return TokenSource::read_loss_mask(start, len, out);
  std::vector<int> values(static_cast<std::size_t>(len));
  // The mask dataset's kept range is the same as this one's (keep_documents sets both).
  mask_->read(start, len, values.data());
  for (int i = 0; i < len; ++i) out[i] = static_cast<std::uint8_t>(values[static_cast<std::size_t>(i)]);
}

void MegatronDataset::check_tokens(int vocab_size, std::uint64_t begin, std::uint64_t end) const {
  constexpr std::uint64_t kChunk = 1 << 16;
  std::vector<int> tokens(kChunk);
  std::vector<std::uint8_t> mask(kChunk);
  for (std::uint64_t at = begin; at < end; at += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, end - at));
    if (mask_) {
      read_loss_mask(at, n, mask.data());
      for (int t = 0; t < n; ++t)
        if (mask[static_cast<std::size_t>(t)] > 1)
          throw UserError(quoted(mask_->bin_.path()) + " holds the value " + std::to_string(mask[static_cast<std::size_t>(t)]) +
                          " at token " + std::to_string(begin_ + at + t) + ", not a loss mask's 0 or 1; re-make it with dtrain-data --sft");
    }
    read(at, n, tokens.data());
    for (int t = 0; t < n; ++t) {
      if (tokens[t] < 0 || tokens[t] >= vocab_size) {
        throw UserError(quoted(bin_.path()) + " holds token id " + std::to_string(tokens[t]) + " at token " +
                        std::to_string(begin_ + at + t) + " of its documents, not below model.vocab_size=" +
                        std::to_string(vocab_size) + "; set model.vocab_size to the tokenizer's vocabulary, or " + kRemake);
      }
    }
  }
}

}  // namespace dtrain
