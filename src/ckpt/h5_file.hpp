// Small RAII helpers over the HDF5 C API for checkpoint files. Every failure becomes a UserError that
// names the file and what was being done, so a bad or missing file is reported, never a crash; HDF5's
// own stack printing is silenced while these run.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::h5 {

class File {
 public:
  static File create(const std::string& path);      // truncates
  static File open_read(const std::string& path);
  File(File&& o) noexcept;
  File& operator=(File&&) = delete;
  File(const File&) = delete;
  ~File();
  void close();  // flushes; throws on failure (a full disk shows here)
  hid_t id() const { return id_; }
  const std::string& path() const { return path_; }

  // Root (or dataset) attributes.
  void set_attr(const std::string& name, std::int64_t v, const std::string& object = "/");
  void set_attr(const std::string& name, const std::string& v, const std::string& object = "/");
  void set_attr(const std::string& name, const std::vector<std::int64_t>& v, const std::string& object = "/");
  std::int64_t attr_int(const std::string& name, const std::string& object = "/") const;
  std::string attr_string(const std::string& name, const std::string& object = "/") const;
  std::vector<std::int64_t> attr_ints(const std::string& name, const std::string& object = "/") const;

  // Float datasets of any shape (parent groups created as needed). Non-finite values are refused.
  void write_floats(const std::string& name, const float* data, const std::vector<std::int64_t>& shape);
  std::vector<float> read_floats(const std::string& name, std::vector<std::int64_t>* shape = nullptr) const;
  // Names of the datasets under a group, recursively ("param/wte/0", ...).
  std::vector<std::string> list_datasets(const std::string& group = "/") const;

 private:
  File(hid_t id, std::string path) : id_(id), path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& what) const;
  hid_t id_;
  std::string path_;
};

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
