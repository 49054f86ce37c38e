// Token file reading (whole file, every field and every token validated) and atomic writing.
#include "data/token_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "ckpt/checksum.hpp"
#include "common/error.hpp"
#include "common/staged_file.hpp"
#include "data/loss_mask_file.hpp"

namespace dtrain {
namespace {

constexpr const char* kRemake = "re-create it with dtrain-data (or tools/prepare-data)";

using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

std::string file_label(const std::string& path) { return "token file '" + path + "'"; }

std::uint64_t load_le(const std::uint8_t* p, std::uint32_t nbytes) {
  std::uint64_t v = 0;
  for (std::uint32_t b = 0; b < nbytes; ++b) v |= static_cast<std::uint64_t>(p[b]) << (8 * b);
  return v;
}

void store_le(std::uint8_t* p, std::uint64_t v, std::uint32_t nbytes) {
  for (std::uint32_t b = 0; b < nbytes; ++b) p[b] = static_cast<std::uint8_t>(v >> (8 * b));
}

std::uint32_t narrowest_bytes_per_token(int vocab_size) {
  if (vocab_size <= 256) return 1;
  if (vocab_size <= 65536) return 2;
  return 4;
}

std::vector<std::uint8_t> read_whole_file(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"), &std::fclose);
  const auto fail = [&path](int err) {
    return UserError("cannot read " + file_label(path) + " (" + std::strerror(err) +
                     "); make it from text with dtrain-data (or tools/prepare-data), or point data.path at "
                     "the prefix of an existing PREFIX.train.bin / PREFIX.val.bin pair");
  };
  if (!f) throw fail(errno);
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint8_t> chunk(1 << 20);
  std::size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), f.get())) > 0) {
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  if (std::ferror(f.get())) throw fail(errno);
  return bytes;
}

TokenFileHeader parse_header(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  if (bytes.size() < kTokenFileHeaderBytes) {
    throw UserError(file_label(path) + " is too short for a header (" + std::to_string(bytes.size()) + " bytes, need " +
                    std::to_string(kTokenFileHeaderBytes) + "); " + kRemake);
  }
  if (std::memcmp(bytes.data(), kTokenFileMagic, sizeof kTokenFileMagic) != 0) {
    throw UserError("'" + path + "' is not a dtrain token file (it does not start with \"DTRAINTK\"); make one from text with dtrain-data");
  }
  TokenFileHeader h;
  h.version = static_cast<std::uint32_t>(load_le(bytes.data() + 8, 4));
  h.vocab_size = static_cast<std::uint32_t>(load_le(bytes.data() + 12, 4));
  h.bytes_per_token = static_cast<std::uint32_t>(load_le(bytes.data() + 16, 4));
  h.tokenizer_bytes = static_cast<std::uint32_t>(load_le(bytes.data() + 20, 4));
  h.count = load_le(bytes.data() + 24, 8);
  return h;
}

void check_format(const TokenFileHeader& h, std::uint64_t file_bytes, const std::string& path) {
  if (h.version != 1 && h.version != kTokenFileVersion) {
    throw UserError(file_label(path) + " has format version " + std::to_string(h.version) + ", but this dtrain reads versions 1 to " +
                    std::to_string(kTokenFileVersion) + "; " + kRemake);
  }
  if ((h.version == 1) != (h.tokenizer_bytes == 0) || h.tokenizer_bytes > file_bytes - kTokenFileHeaderBytes) {
    throw UserError(file_label(path) + " has a tokenizer identity of " + std::to_string(h.tokenizer_bytes) + " bytes in a version " +
                    std::to_string(h.version) + " header of a " + std::to_string(file_bytes) + "-byte file; the header is corrupt, " + kRemake);
  }
  if (h.bytes_per_token != 1 && h.bytes_per_token != 2 && h.bytes_per_token != 4) {
    throw UserError(file_label(path) + " has bytes_per_token=" + std::to_string(h.bytes_per_token) +
                    " (must be 1, 2 or 4); the header is corrupt, " + kRemake);
  }
  const std::uint64_t body = file_bytes - kTokenFileHeaderBytes - h.tokenizer_bytes;
  const std::uint64_t held = body / h.bytes_per_token;  // whole tokens present on disk
  if (held < h.count) {
    throw UserError(file_label(path) + " is truncated: its header declares " + std::to_string(h.count) + " tokens of " +
                    std::to_string(h.bytes_per_token) + " byte(s) but only " + std::to_string(body) +
                    " bytes follow the header; " + kRemake);
  }
  if (body != h.count * h.bytes_per_token) {
    throw UserError(file_label(path) + " has " + std::to_string(body - h.count * h.bytes_per_token) +
                    " trailing bytes after the " + std::to_string(h.count) + " tokens its header declares; " + kRemake);
  }
}

void check_vocab(const TokenFileHeader& h, int model_vocab_size, const std::string& path) {
  if (static_cast<std::int64_t>(h.vocab_size) > model_vocab_size) {
    throw UserError("model.vocab_size=" + std::to_string(model_vocab_size) + " is smaller than the token file's vocabulary " +
                    std::to_string(h.vocab_size) + " (" + file_label(path) + "); set model.vocab_size to at least " +
                    std::to_string(h.vocab_size));
  }
}

std::vector<std::uint8_t> encode(const std::vector<std::uint32_t>& tokens, int vocab_size, const std::string& tokenizer) {
  if (vocab_size <= 0) throw std::invalid_argument("TokenFile::write: vocab_size must be positive");
  if (tokenizer.empty()) throw std::invalid_argument("TokenFile::write: the tokenizer identity is empty");
  const std::uint32_t w = narrowest_bytes_per_token(vocab_size);
  const std::string identity = tokenizer == "byte" ? "" : tokenizer;  // a byte file is a version 1 file
  const std::size_t body = kTokenFileHeaderBytes + identity.size();
  std::vector<std::uint8_t> bytes(body + tokens.size() * w, 0);
  std::memcpy(bytes.data(), kTokenFileMagic, sizeof kTokenFileMagic);
  store_le(bytes.data() + 8, identity.empty() ? 1 : kTokenFileVersion, 4);
  store_le(bytes.data() + 12, static_cast<std::uint32_t>(vocab_size), 4);
  store_le(bytes.data() + 16, w, 4);
  store_le(bytes.data() + 20, identity.size(), 4);
  store_le(bytes.data() + 24, tokens.size(), 8);
  std::memcpy(bytes.data() + kTokenFileHeaderBytes, identity.data(), identity.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= static_cast<std::uint32_t>(vocab_size)) {
      throw std::invalid_argument("TokenFile::write: token id " + std::to_string(tokens[i]) + " at position " +
                                  std::to_string(i) + " is not below vocab_size " + std::to_string(vocab_size));
    }
    store_le(bytes.data() + body + i * w, tokens[i], w);
  }
  return bytes;
}

}  // namespace

TokenFile::TokenFile(TokenFileHeader header, std::vector<std::uint8_t> bytes)
    : header_(header),
      bytes_(std::move(bytes)),
      tokenizer_(header.version == 1 ? "byte"
                                     : std::string(bytes_.begin() + kTokenFileHeaderBytes,
                                                   bytes_.begin() + kTokenFileHeaderBytes + header.tokenizer_bytes)),
      body_(kTokenFileHeaderBytes + header.tokenizer_bytes) {}

std::uint32_t TokenFile::token_at(std::uint64_t i) const {
  const std::uint32_t w = header_.bytes_per_token;
  return static_cast<std::uint32_t>(load_le(bytes_.data() + body_ + i * w, w));
}

TokenFile TokenFile::open(const std::string& path, int model_vocab_size) {
  std::vector<std::uint8_t> bytes = read_whole_file(path);
  const TokenFileHeader header = parse_header(bytes, path);
  check_format(header, bytes.size(), path);
  check_vocab(header, model_vocab_size, path);
  TokenFile file(header, std::move(bytes));
  for (std::uint64_t i = 0; i < header.count; ++i) {
    const std::uint32_t id = file.token_at(i);
    if (id >= header.vocab_size) {
      throw UserError(file_label(path) + " holds token id " + std::to_string(id) + " at position " + std::to_string(i) +
                      ", not below its vocabulary size " + std::to_string(header.vocab_size) + "; the file is corrupt, " +
                      kRemake);
    }
  }
  return file;
}

void TokenFile::read(std::uint64_t start, int len, int* out) const {
  if (len < 0 || start > size() || static_cast<std::uint64_t>(len) > size() - start) {
    throw std::out_of_range("TokenFile::read: tokens [" + std::to_string(start) + ", +" + std::to_string(len) +
                            ") past the end of a file of " + std::to_string(size()) + " tokens");
  }
  for (int t = 0; t < len; ++t) out[t] = static_cast<int>(token_at(start + t));
}

std::uint64_t TokenFile::write(StagedFile& out, const std::vector<std::uint32_t>& tokens, int vocab_size, const std::string& tokenizer) {
  const std::vector<std::uint8_t> bytes = encode(tokens, vocab_size, tokenizer);
  out.write(bytes.data(), bytes.size());
  return h5::hash64(bytes.data(), bytes.size());
}

std::uint64_t TokenFile::write(const std::string& path, const std::vector<std::uint32_t>& tokens, int vocab_size,
                               const std::string& tokenizer) {
  StagedFile out(path, "token file");
  const std::uint64_t hash = write(out, tokens, vocab_size, tokenizer);
  out.publish();
  return hash;
}

std::uint64_t TokenFile::content_hash() const { return h5::hash64(bytes_.data(), bytes_.size()); }

void TokenFile::attach_loss_mask(const std::string& mask_path, const std::string& path) {
  mask_ = dtrain::read_loss_mask(mask_path, header_.count, content_hash(), path);
  has_mask_ = true;
}

void TokenFile::read_loss_mask(std::uint64_t start, int len, std::uint8_t* out) const {
  if (!has_mask_) return TokenSource::read_loss_mask(start, len, out);
  if (len < 0 || start > size() || static_cast<std::uint64_t>(len) > size() - start)
    throw std::out_of_range("TokenFile::read_loss_mask: past the end");
  std::copy_n(mask_.begin() + static_cast<std::ptrdiff_t>(start), len, out);
}

}  // namespace dtrain
