// The token file: its on-disk format (header + packed unsigned tokens, little-endian) and the
// validated reader that loads a whole file into memory. Made from text by tools/dtrain-data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/token_source.hpp"

namespace dtrain {

class StagedFile;

// Layout of the 32-byte header; integers are little-endian on disk whatever the host.
//   offset 0  char[8]  magic "DTRAINTK"
//   offset 8  uint32   version (kTokenFileVersion)
//   offset 12 uint32   vocab_size: every token id is below it
//   offset 16 uint32   bytes_per_token: 1, 2 or 4
//   offset 20 uint32   tokenizer_bytes: version 1: 0 (the byte tokenizer); version 2: the length of
//                      the tokenizer's identity (src/tokenizer), whose text follows the header
//   offset 24 uint64   count: number of tokens that follow (after the identity in version 2)
// Byte-tokenised files are written as version 1, the others as version 2.
struct TokenFileHeader {
  std::uint32_t version = 0;
  std::uint32_t vocab_size = 0;
  std::uint32_t bytes_per_token = 0;
  std::uint32_t tokenizer_bytes = 0;
  std::uint64_t count = 0;
};

constexpr char kTokenFileMagic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'T', 'K'};
constexpr std::uint32_t kTokenFileVersion = 2;  // the newest; 1 is read too
constexpr std::size_t kTokenFileHeaderBytes = 32;

class TokenFile : public TokenSource {
 public:
  // Reads and validates the whole file; every problem is a UserError naming the file and the fix.
  static TokenFile open(const std::string& path, int model_vocab_size);
  // Writes tokens (each below vocab_size) with the narrowest bytes_per_token and the identity of the
  // tokenizer that made them, staged and published (common/staged_file). Throws UserError when the file
  // cannot be written. Returns the hash of the bytes written (what a loss mask file records).
  static std::uint64_t write(const std::string& path, const std::vector<std::uint32_t>& tokens, int vocab_size,
                             const std::string& tokenizer = "byte");
  // The same into a staged file the caller publishes (with the other files of its output).
  static std::uint64_t write(StagedFile& out, const std::vector<std::uint32_t>& tokens, int vocab_size, const std::string& tokenizer);

  std::uint64_t size() const override { return header_.count; }
  int vocab_size() const { return static_cast<int>(header_.vocab_size); }
  // The identity of the tokenizer that made the file ("byte" for version 1).
  const std::string& tokenizer() const { return tokenizer_; }
  // Tokens [start, start + len) as int; throws std::out_of_range past the end.
  void read(std::uint64_t start, int len, int* out /*(len)*/) const override;
  // The 64-bit hash of the whole file (ckpt/checksum), as a loss mask file records it.
  std::uint64_t content_hash() const;
  // Takes the loss mask file `mask_path` (data/loss_mask_file.hpp), checked against this file (named
  // `path` in errors); a UserError when it belongs to other tokens.
  void attach_loss_mask(const std::string& mask_path, const std::string& path);
  bool has_loss_mask() const override { return has_mask_; }
  void read_loss_mask(std::uint64_t start, int len, std::uint8_t* out) const override;

 private:
  TokenFile(TokenFileHeader header, std::vector<std::uint8_t> bytes);
  std::uint32_t token_at(std::uint64_t i) const;

  TokenFileHeader header_;
  std::vector<std::uint8_t> bytes_;  // the whole file
  std::string tokenizer_;
  std::size_t body_ = kTokenFileHeaderBytes;  // where the tokens start in bytes_
  std::vector<std::uint8_t> mask_;  // the loss mask, one byte per token, when attached
  bool has_mask_ = false;
};

}  // namespace dtrain
