// Read-only mmap of a whole file (open, fstat, mmap, close; munmap at the end).
#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.hpp"

namespace dtrain {

MappedFile::MappedFile(const std::string& path, const std::string& what) : path_(path) {
  const auto fail = [&](const char* doing, int err) {
    return UserError("cannot " + std::string(doing) + " the " + what + " '" + path + "' (" + std::strerror(err) +
                     "); check data.path (Megatron datasets are PREFIX.bin + PREFIX.idx; make one with "
                     "dtrain-data --format megatron)");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail("open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw fail("stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw fail("map", EINVAL);
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw fail("map", err);
    data_ = static_cast<const std::uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace dtrain
