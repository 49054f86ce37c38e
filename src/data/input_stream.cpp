// InputStream's three forms (plain stdio, zlib's gzread, libzstd's streaming decompression) and the
// line splitter over them.
#include "data/input_stream.hpp"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace dtrain {
namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

[[noreturn]] void cannot_read(const std::string& path, const std::string& why) {
  throw UserError("cannot read input file '" + path + "' (" + why + "); check the path");
}

using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

FilePtr open_file(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) cannot_read(path, std::strerror(errno));
  return f;
}

class PlainStream final : public InputStream {
 public:
  explicit PlainStream(const std::string& path) : InputStream(path), f_(open_file(path)) {}
  std::size_t read(char* buf, std::size_t n) override {
    const std::size_t got = std::fread(buf, 1, n, f_.get());
    if (got == 0 && std::ferror(f_.get())) cannot_read(path_, std::strerror(errno));
    read_ += got;
    return got;
  }
  std::uint64_t file_bytes_read() const override { return read_; }

 private:
  FilePtr f_;
  std::uint64_t read_ = 0;
};

class GzipStream final : public InputStream {
 public:
  explicit GzipStream(const std::string& path) : InputStream(path) {
    {  // the magic first: gzread would pass a file that is not gzip through unchanged
      FilePtr f = open_file(path);
      unsigned char magic[2] = {0, 0};
      if (std::fread(magic, 1, 2, f.get()) != 2 || magic[0] != 0x1f || magic[1] != 0x8b)
        throw UserError("input file '" + path + "' ends in .gz but is not gzip data (no gzip magic); decompress it or rename it");
    }
    gz_ = gzopen(path.c_str(), "rb");
    if (!gz_) cannot_read(path, errno ? std::strerror(errno) : "zlib cannot open it");
    gzbuffer(gz_, 1 << 18);
  }
  ~GzipStream() override {
    if (gz_) gzclose(gz_);
  }
  std::size_t read(char* buf, std::size_t n) override {
    const int got = gzread(gz_, buf, static_cast<unsigned>(n > (1u << 30) ? (1u << 30) : n));
    int code = Z_OK;
    const char* why = got > 0 ? nullptr : gzerror(gz_, &code);
    if (got < 0 || (got == 0 && code != Z_OK)) {  // a truncated stream ends with no bytes and Z_BUF_ERROR set
      throw UserError("input file '" + path_ + "' holds corrupt or truncated gzip data (zlib: " + std::string(why ? why : "?") +
                      "); re-download or re-compress it");
    }
    return static_cast<std::size_t>(got);
  }
  std::uint64_t file_bytes_read() const override { return static_cast<std::uint64_t>(gzoffset(gz_)); }

 private:
  gzFile gz_ = nullptr;
};

class ZstdStream final : public InputStream {
 public:
  explicit ZstdStream(const std::string& path) : InputStream(path), f_(open_file(path)), in_buf_(ZSTD_DStreamInSize()) {
    ds_ = ZSTD_createDStream();
    if (!ds_) throw UserError("input file '" + path + "': libzstd cannot create a decompression stream");
    ZSTD_initDStream(ds_);
    // A frame may not declare a window larger than 2^27 bytes (zstd's default limit for decompression):
    // a hostile header must not make us allocate what the file cannot justify.
    ZSTD_DCtx_setParameter(ds_, ZSTD_d_windowLogMax, 27);
  }
  ~ZstdStream() override { ZSTD_freeDStream(ds_); }
  std::size_t read(char* buf, std::size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    while (out.pos == 0) {
      if (in_.pos == in_.size) {
        const std::size_t got = std::fread(in_buf_.data(), 1, in_buf_.size(), f_.get());
        if (got == 0) {
          if (std::ferror(f_.get())) cannot_read(path_, std::strerror(errno));
          if (pending_ != 0)
            throw UserError("input file '" + path_ + "' holds truncated zstd data (the stream ends inside a frame); re-download it");
          return 0;
        }
        read_ += got;
        in_ = ZSTD_inBuffer{in_buf_.data(), got, 0};
      }
      pending_ = ZSTD_decompressStream(ds_, &out, &in_);
      if (ZSTD_isError(pending_))
        throw UserError("input file '" + path_ + "' holds corrupt zstd data (libzstd: " + ZSTD_getErrorName(pending_) +
                        "); re-download or re-compress it");
    }
    return out.pos;
  }
  std::uint64_t file_bytes_read() const override { return read_; }

 private:
  FilePtr f_;
  std::vector<char> in_buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  ZSTD_DStream* ds_ = nullptr;
  std::size_t pending_ = 0;  // ZSTD_decompressStream's last hint: 0 once a frame is complete
  std::uint64_t read_ = 0;
};

}  // namespace

Compression compression_of(const std::string& path) {
  if (ends_with(path, ".gz")) return Compression::gzip;
  if (ends_with(path, ".zst")) return Compression::zstd;
  return Compression::none;
}

std::unique_ptr<InputStream> open_input(const std::string& path) {
  switch (compression_of(path)) {
    case Compression::gzip: return std::make_unique<GzipStream>(path);
    case Compression::zstd: return std::make_unique<ZstdStream>(path);
    case Compression::none: break;
  }
  return std::make_unique<PlainStream>(path);
}

LineReader::LineReader(std::unique_ptr<InputStream> in, std::size_t max_line_bytes)
    : in_(std::move(in)), max_line_(max_line_bytes), buf_(std::size_t{1} << 20) {}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {  // keep the unread bytes at the front
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_, begin_ = 0;
  }
  if (end_ == buf_.size()) {
    if (buf_.size() >= max_line_)
      throw UserError("input file '" + in_->path() + "': line " + std::to_string(line_number_ + 1) + " is longer than " +
                      std::to_string(max_line_ >> 20) + " MiB; is it one JSON document per line (JSON Lines)?");
    buf_.resize(buf_.size() * 2);
  }
  const std::size_t got = in_->read(buf_.data() + end_, buf_.size() - end_);
  end_ += got;
  if (got == 0) eof_ = true;
  return got > 0;
}

bool LineReader::next(std::string_view& line) {
  std::size_t scanned = begin_;
  for (;;) {
    const void* nl = std::memchr(buf_.data() + scanned, '\n', end_ - scanned);
    if (nl) {
      const std::size_t at = static_cast<const char*>(nl) - buf_.data();
      line = std::string_view(buf_.data() + begin_, at - begin_);
      begin_ = at + 1;
      ++line_number_;
      newline_ = true;
      return true;
    }
    const std::size_t offset = end_ - begin_;  // fill() moves the unread bytes to the front
    if (!fill()) break;
    scanned = begin_ + offset;
  }
  if (begin_ == end_) return false;
  line = std::string_view(buf_.data() + begin_, end_ - begin_);  // the last line, without '\n'
  begin_ = end_;
  ++line_number_;
  newline_ = false;
  return true;
}

}  // namespace dtrain
