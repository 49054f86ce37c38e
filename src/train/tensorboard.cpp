// TensorBoardFile: the protobuf wire format of Event and Summary by hand (varints, 64-bit doubles,
// 32-bit floats, length-delimited strings and messages), TFRecord framing, CRC32C from Boost.CRC.
#include "train/tensorboard.hpp"

#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace dtrain {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void key(std::string& out, int field, int wire_type) { varint(out, static_cast<std::uint64_t>(field) << 3 | wire_type); }

template <typename T>
void little_endian(std::string& out, T v) {  // x86-64 and aarch64 store little-endian
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void bytes_field(std::string& out, int field, const std::string& bytes) {
  key(out, field, kBytes);
  varint(out, bytes.size());
  out += bytes;
}

// Event fields: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5.
std::string event_head(std::int64_t step) {
  std::string e;
  key(e, 1, kFixed64);
  little_endian(e, std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  if (step != 0) {
    key(e, 2, kVarint);
    varint(e, static_cast<std::uint64_t>(step));
  }
  return e;
}

}  // namespace

std::uint32_t tfrecord_masked_crc(const void* data, std::size_t n) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc32c;  // Castagnoli
  crc32c.process_bytes(data, n);
  const std::uint32_t c = crc32c.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardFile::TensorBoardFile(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  path_ = dir + "/events.out.tfevents." + std::to_string(now) + "." + host + "." + std::to_string(getpid());
  file_.reset(std::fopen(path_.c_str(), "wb"));
  if (!file_) throw UserError("cannot create the TensorBoard event file '" + path_ + "' (" + std::strerror(errno) + ")");
  std::string e = event_head(0);
  bytes_field(e, 3, "brain.Event:2");
  record(e);
}

void TensorBoardFile::scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  // Summary: repeated Value value = 1; Value: tag = 1 (string), simple_value = 2 (float).
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    bytes_field(value, 1, tag);
    key(value, 2, kFixed32);
    little_endian(value, static_cast<float>(v));
    bytes_field(summary, 1, value);
  }
  std::string e = event_head(step);
  bytes_field(e, 5, summary);
  record(e);
}

void TensorBoardFile::record(const std::string& event) {
  std::string r;
  const std::uint64_t n = event.size();
  little_endian(r, n);
  little_endian(r, tfrecord_masked_crc(r.data(), 8));
  r += event;
  little_endian(r, tfrecord_masked_crc(event.data(), event.size()));
  if (std::fwrite(r.data(), 1, r.size(), file_.get()) != r.size() || std::fflush(file_.get()) != 0)
    throw UserError("cannot write the TensorBoard event file '" + path_ + "' (" + std::strerror(errno) + ")");
}

}  // namespace dtrain
