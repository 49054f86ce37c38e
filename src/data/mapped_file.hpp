// MappedFile: a whole file mapped read-only into memory (mmap), unmapped when the object goes away.
// Megatron datasets are read through it in place, without a copy or a conversion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrain {

class MappedFile {
 public:
  // Maps the file at `path`; UserError naming `what` and the path when it cannot be opened or mapped.
  // `what` says what the file is, e.g. "Megatron index".
  MappedFile(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }  // null for an empty file
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void unmap();

  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace dtrain
