// The checkpoint hash (four multiply-rotate lanes), its hex form, and the finiteness check.
#include "ckpt/checksum.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/error.hpp"

namespace dtrain::h5 {

namespace {
inline std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ull, kPrime2 = 0xC2B2AE3D27D4EB4Full;
}  // namespace

void Hasher::block(const unsigned char* p) {
  for (int i = 0; i < 4; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    lanes_[i] = rotl(lanes_[i] + w * kPrime2, 31) * kPrime1;
  }
}

void Hasher::update(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += bytes;
  if (tail_len_ > 0) {
    const std::size_t take = std::min(bytes, 32 - tail_len_);
    std::memcpy(tail_ + tail_len_, p, take);
    tail_len_ += take, p += take, bytes -= take;
    if (tail_len_ < 32) return;
    block(tail_);
    tail_len_ = 0;
  }
  for (; bytes >= 32; p += 32, bytes -= 32) block(p);
  std::memcpy(tail_, p, bytes);
  tail_len_ = bytes;
}

std::uint64_t Hasher::digest() const {
  std::uint64_t h = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18) + total_;
  for (std::size_t i = 0; i < tail_len_; ++i) h = rotl(h ^ (tail_[i] * kPrime1), 11) * kPrime2;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  return h;
}

bool all_finite(const float* data, std::size_t n) {
  // An exponent of all ones is NaN or infinity; the branch-free loop vectorises.
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, data + i, 4);
    bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

std::uint64_t hash64(const void* data, std::size_t bytes) {
  Hasher h;
  h.update(data, bytes);
  return h.digest();
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_hex64(const std::string& text, std::uint64_t& v) {
  if (text.size() != 16) return false;
  std::uint64_t x = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    x = x << 4 | static_cast<std::uint64_t>(d);
  }
  v = x;
  return true;
}

std::uint64_t file_hash(const std::string& path, std::uint64_t* size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read '" + path + "' (missing?)");
  Hasher h;
  std::uint64_t n = 0;
  std::vector<char> buf(1 << 22);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    h.update(buf.data(), got);
    n += got;
  }
  if (size) *size = n;
  return h.digest();
}

}  // namespace dtrain::h5
