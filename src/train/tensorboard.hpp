// TensorBoard event files, written from their public description (TensorFlow's event.proto and
// summary.proto, and its TFRecord framing: record_writer.cc): rank 0 writes
// DIR/events.out.tfevents.<unix time>.<host>.<pid>, first an Event with file_version "brain.Event:2",
// then one Event per logged step holding a Summary of scalars (tag, simple_value as float).
// Each Event is one record: its length (uint64), the masked CRC32C of those 8 bytes, the bytes, and
// their masked CRC32C, all little-endian; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

class TensorBoardFile {
 public:
  // Creates dir (and its parents) and a new event file in it; UserError naming the path if it cannot.
  explicit TensorBoardFile(const std::string& dir);
  // One Event at `step` with one scalar per (tag, value), flushed to the file; UserError if the write fails.
  void scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::string& path() const { return path_; }

 private:
  void record(const std::string& event);  // frames and appends one serialized Event

  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, &std::fclose};
};

// The masked CRC32C TFRecord framing stores (exposed for its unit test).
std::uint32_t tfrecord_masked_crc(const void* data, std::size_t n);

}  // namespace dtrain
