// StagedFile and the publication of staged files: POSIX calls, each checked (so that a preloaded
// failure injector, tests/support/fail_io.c, reaches every one of them).
#include "common/staged_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace dtrain {
namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

std::string advice(int err) {
  if (err == ENOSPC || err == EDQUOT) return "; free space there or write elsewhere";
  if (err == EACCES || err == EPERM || err == EROFS) return "; write to a directory that is writable";
  if (err == ENOENT || err == ENOTDIR) return "; check that its directory exists";
  return "";
}

[[noreturn]] void throw_failure(const std::string& what, const std::string& path, const std::string& step, int err) {
  throw UserError("cannot write " + what + " '" + path + "': " + step + " failed (" + std::strerror(err) + "); nothing was written" +
                  advice(err));
}

int sync_fd_of(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  const int closed = ::close(fd) == 0 ? 0 : errno;
  return err ? err : closed;
}

}  // namespace

std::string staged_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

void sync_path(const std::string& path) {
  if (const int err = sync_fd_of(path)) throw UserError("cannot sync '" + path + "' to disk (" + std::strerror(err) + ")");
}

StagedFile::StagedFile(std::string path, std::string what) : path_(std::move(path)), tmp_(staged_name(path_)), what_(std::move(what)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("creating '" + tmp_ + "'", errno);
  buffer_.reserve(kBufferBytes);
}

StagedFile::~StagedFile() {
  if (published_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(tmp_.c_str());
}

void StagedFile::fail(const std::string& step, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  published_ = true;  // nothing left for the destructor
  throw_failure(what_, path_, step, err);
}

void StagedFile::flush() {
  const char* p = buffer_.data();
  std::size_t left = buffer_.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing '" + tmp_ + "'", n < 0 ? errno : EIO);
    p += n, left -= static_cast<std::size_t>(n);
  }
  buffer_.clear();
}

void StagedFile::write(const void* data, std::size_t bytes) {
  if (finished_) throw std::logic_error("StagedFile::write after finish: " + path_);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const std::size_t take = std::min(bytes, kBufferBytes - buffer_.size());
    buffer_.insert(buffer_.end(), p, p + take);
    p += take, bytes -= take;
    if (buffer_.size() == kBufferBytes) flush();
  }
}

void StagedFile::finish() {
  if (finished_) return;
  flush();
  if (::fsync(fd_) != 0) fail("syncing '" + tmp_ + "' to disk", errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail("closing '" + tmp_ + "'", errno);
  finished_ = true;
}

void StagedFile::publish() {
  finish();
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("renaming '" + tmp_ + "' to it", errno);
  published_ = true;
  if (const int err = sync_fd_of(parent_directory(path_)))
    throw UserError("wrote " + what_ + " '" + path_ + "', but syncing its directory to disk failed (" + std::strerror(err) +
                    "); it may not survive a crash of this node");
}

void publish_together(const std::vector<StagedFile*>& files) {
  for (auto* f : files) f->finish();
  for (std::size_t i = 0; i < files.size(); ++i) {
    try {
      files[i]->publish();
    } catch (const UserError&) {
      for (std::size_t j = 0; j < i; ++j) ::unlink(files[j]->path().c_str());
      throw;
    }
  }
}

void write_file_atomically(const std::string& path, std::string_view bytes, const std::string& what) {
  StagedFile f(path, what);
  f.write(bytes);
  f.publish();
}

void publish_file(const std::string& tmp, const std::string& path, const std::string& what) {
  auto failed = [&](const std::string& step, int err) {
    ::unlink(tmp.c_str());
    throw_failure(what, path, step, err);
  };
  if (const int err = sync_fd_of(tmp)) failed("syncing '" + tmp + "' to disk", err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) failed("renaming '" + tmp + "' to it", errno);
  if (const int err = sync_fd_of(parent_directory(path)))
    throw UserError("wrote " + what + " '" + path + "', but syncing its directory to disk failed (" + std::strerror(err) +
                    "); it may not survive a crash of this node");
}

}  // namespace dtrain
