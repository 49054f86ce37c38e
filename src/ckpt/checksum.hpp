// Checksums and value checks of checkpoint data: the 64-bit hash of datasets and shard files, its
// hexadecimal text form, and the finiteness check every written dataset passes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrain::h5 {

// The checksum of datasets and shard files: a 64-bit hash over a byte stream, four independent
// multiply-rotate lanes over 8-byte words (several GB/s, so checking never dominates checkpoint I/O).
class Hasher {
 public:
  void update(const void* data, std::size_t bytes);
  std::uint64_t digest() const;

 private:
  void block(const unsigned char* p);  // 32 bytes
  std::uint64_t lanes_[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x85EBCA77C2B2AE63ull};
  unsigned char tail_[32] = {};
  std::size_t tail_len_ = 0;
  std::uint64_t total_ = 0;
};
std::uint64_t hash64(const void* data, std::size_t bytes);
// True when no value is NaN or infinite.
bool all_finite(const float* data, std::size_t n);
std::string hex64(std::uint64_t v);
// The inverse of hex64: exactly 16 hexadecimal digits. False (v untouched) for anything else.
bool parse_hex64(const std::string& text, std::uint64_t& v);
// Hash of a whole file's bytes (and its size); throws UserError if unreadable.
std::uint64_t file_hash(const std::string& path, std::uint64_t* size = nullptr);

}  // namespace dtrain::h5
