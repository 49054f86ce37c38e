// InputStream's forms (plain, gzip through zlib's inflate, zstd through libzstd, xz through liblzma,
// bzip2 through libbz2), the choice by name checked against the file's magic bytes, and the line
// splitter over them.
#include "data/input_stream.hpp"

#include <bzlib.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
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

struct Format {
  Compression c;
  const char* name;    // as the messages say it
  const char* suffix;  // the file name's ending that selects it
  const char* tool;    // the command that decompresses it
};
constexpr Format kFormats[] = {{Compression::none, "plain", "", "cat"},
                               {Compression::gzip, "gzip", ".gz", "gzip -d"},
                               {Compression::zstd, "zstd", ".zst", "zstd -d"},
                               {Compression::xz, "xz", ".xz", "xz -d"},
                               {Compression::bzip2, "bzip2", ".bz2", "bzip2 -d"}};
const Format& format(Compression c) { return kFormats[static_cast<int>(c)]; }

// What the first bytes of a file say it is: each format's magic (bzip2's with its first block's).
Compression sniff(const unsigned char* b, std::size_t n) {
  const auto starts = [&](std::initializer_list<unsigned char> m) {
    return n >= m.size() && std::equal(m.begin(), m.end(), b);
  };
  if (starts({0x1f, 0x8b})) return Compression::gzip;
  if (starts({0x28, 0xb5, 0x2f, 0xfd})) return Compression::zstd;
  if (starts({0xfd, '7', 'z', 'X', 'Z', 0x00})) return Compression::xz;
  // bzip2: "BZh" and the block size, then a block's magic (pi) or an empty stream's end (sqrt pi).
  if (n >= 10 && starts({'B', 'Z', 'h'}) && b[3] >= '1' && b[3] <= '9' &&
      (std::memcmp(b + 4, "\x31\x41\x59\x26\x53\x59", 6) == 0 || std::memcmp(b + 4, "\x17\x72\x45\x38\x50\x90", 6) == 0))
    return Compression::bzip2;
  return Compression::none;
}

class PlainStream final : public InputStream {
 public:
  PlainStream(const std::string& path, FilePtr f) : InputStream(path), f_(std::move(f)) {}
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

// A decompressor over the file's bytes: the input buffer and its refills, the errors every format
// shares; decode() is the format's step.
class CompressedStream : public InputStream {
 public:
  CompressedStream(const std::string& path, FilePtr f, Compression c) : InputStream(path), f_(std::move(f)), format_(format(c)) {}
  std::size_t read(char* buf, std::size_t n) override {
    std::size_t out = 0;
    while (out == 0 && !done_) {
      if (in_pos_ == in_end_ && !eof_) refill();
      out = decode(buf, n);
    }
    return out;
  }
  std::uint64_t file_bytes_read() const override { return read_; }

 protected:
  // Decompresses into buf (up to n bytes) from in(), consuming what it used (consume()); at the end of
  // the data sets done_ (end()); returns the bytes written (0 is fine: more input is read).
  virtual std::size_t decode(char* buf, std::size_t n) = 0;
  const unsigned char* in() const { return in_.data() + in_pos_; }
  std::size_t in_size() const { return in_end_ - in_pos_; }
  void consume(std::size_t k) { in_pos_ += k; }
  bool at_file_end() const { return eof_ && in_pos_ == in_end_; }
  std::uint64_t offset() const { return read_ - in_size(); }  // of in() in the file
  // The data ended at a frame or member's end: what follows must be another one (`next` says whether
  // the next bytes start one; zero bytes after the last are allowed, as gzip -d allows them).
  bool another_follows() {
    if (in_size() < 16 && !eof_) refill();
    if (in_size() == 0) return false;
    if (starts_next(in(), in_size())) return true;
    const std::uint64_t at = offset();
    for (;;) {
      if (std::any_of(in(), in() + in_size(), [](unsigned char b) { return b != 0; }))
        throw UserError("input file '" + path_ + "' has " + std::string(format_.name) + " data followed by other bytes at offset " +
                        std::to_string(at) + " (a damaged file, or two files joined); re-download or re-compress it");
      consume(in_size());
      if (eof_) return false;
      refill();
    }
  }
  // Whether bytes start another frame or member of the format.
  virtual bool starts_next(const unsigned char* b, std::size_t n) const { return sniff(b, n) == format_.c; }
  void end() { done_ = true; }
  [[noreturn]] void corrupt(const std::string& detail) const {
    throw UserError("input file '" + path_ + "' holds corrupt " + format_.name + " data near offset " + std::to_string(offset()) + " (" +
                    detail + "); re-download or re-compress it");
  }
  [[noreturn]] void truncated() const {
    throw UserError("input file '" + path_ + "' holds truncated " + std::string(format_.name) +
                    " data (the file ends inside a frame); re-download it");
  }

 private:
  void refill() {
    if (in_pos_ > 0) {  // keep what is left at the front
      std::memmove(in_.data(), in_.data() + in_pos_, in_end_ - in_pos_);
      in_end_ -= in_pos_, in_pos_ = 0;
    }
    const std::size_t got = std::fread(in_.data() + in_end_, 1, in_.size() - in_end_, f_.get());
    if (got == 0 && std::ferror(f_.get())) cannot_read(path_, std::strerror(errno));
    if (got == 0) eof_ = true;
    in_end_ += got, read_ += got;
  }
  FilePtr f_;
  const Format& format_;
  std::vector<unsigned char> in_ = std::vector<unsigned char>(std::size_t{1} << 18);
  std::size_t in_pos_ = 0, in_end_ = 0;
  std::uint64_t read_ = 0;
  bool eof_ = false, done_ = false;
};

// gzip: every member in turn (gzip -d's reading of concatenated members); a damaged member, a
// truncated one or other bytes after the last is an error, never the end of the data.
class GzipStream final : public CompressedStream {
 public:
  GzipStream(const std::string& path, FilePtr f) : CompressedStream(path, std::move(f), Compression::gzip) {
    if (inflateInit2(&z_, 15 + 16) != Z_OK) throw UserError("input file '" + path + "': zlib cannot start a decompression");
  }
  ~GzipStream() override { inflateEnd(&z_); }

 private:
  std::size_t decode(char* buf, std::size_t n) override {
    z_.next_in = const_cast<unsigned char*>(in());
    z_.avail_in = static_cast<uInt>(std::min<std::size_t>(in_size(), 1u << 30));
    z_.next_out = reinterpret_cast<unsigned char*>(buf);
    z_.avail_out = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    const uInt before = z_.avail_in;
    const int rc = inflate(&z_, Z_NO_FLUSH);
    consume(before - z_.avail_in);
    const std::size_t out = static_cast<std::size_t>(reinterpret_cast<char*>(z_.next_out) - buf);
    if (rc == Z_STREAM_END) {
      if (another_follows())
        inflateReset(&z_);
      else
        end();
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      corrupt(std::string("zlib: ") + (z_.msg ? z_.msg : "error " + std::to_string(rc)));
    } else if (out == 0 && at_file_end()) {
      truncated();  // the member has not ended and nothing is left to read
    }
    return out;
  }
  z_stream z_{};
};

class ZstdStream final : public CompressedStream {
 public:
  ZstdStream(const std::string& path, FilePtr f) : CompressedStream(path, std::move(f), Compression::zstd) {
    ds_ = ZSTD_createDStream();
    if (!ds_) throw UserError("input file '" + path + "': libzstd cannot create a decompression stream");
    ZSTD_initDStream(ds_);
    // A frame may not declare a window larger than 2^27 bytes (zstd's default limit for decompression):
    // a hostile header must not make us allocate what the file cannot justify.
    ZSTD_DCtx_setParameter(ds_, ZSTD_d_windowLogMax, kWindowLog);
  }
  ~ZstdStream() override { ZSTD_freeDStream(ds_); }

 private:
  static constexpr int kWindowLog = 27;
  std::size_t decode(char* buf, std::size_t n) override {
    if (pending_ == 0 && (frames_ > 0 ? !another_follows() : at_file_end())) {  // at a frame's end: another, or the end
      end();
      return 0;
    }
    ZSTD_inBuffer input{in(), in_size(), 0};
    ZSTD_outBuffer out{buf, n, 0};
    const std::size_t rc = ZSTD_decompressStream(ds_, &out, &input);
    if (ZSTD_isError(rc)) {
      if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge) window_too_large(input);
      corrupt(std::string("libzstd: ") + ZSTD_getErrorName(rc));
    }
    consume(input.pos);
    if (rc == 0) ++frames_;
    pending_ = rc;
    if (rc != 0 && out.pos == 0 && input.pos == 0 && at_file_end()) truncated();
    return out.pos;
  }
  bool starts_next(const unsigned char* b, std::size_t n) const override {
    // a frame, or a skippable frame (magic 0x184D2A50 to 0x184D2A5F, little-endian)
    return sniff(b, n) == Compression::zstd || (n >= 4 && (b[0] & 0xf0) == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18);
  }
  // The frame's window from its header (RFC 8878, 3.1.1.1: the descriptor byte after the magic; without
  // the single-segment flag the window descriptor follows, 10 + its exponent the log of the window).
  [[noreturn]] void window_too_large(const ZSTD_inBuffer& input) const {
    const auto* b = static_cast<const unsigned char*>(input.src);
    int log = kWindowLog + 1;
    if (input.size >= 6 && !(b[4] & 0x20)) log = 10 + (b[5] >> 3) + ((b[5] & 7) ? 1 : 0);
    throw UserError("input file '" + path_ + "' is zstd data whose frames need a window of 2^" + std::to_string(log) +
                    " bytes (made with zstd --long=" + std::to_string(log) + "), more than the 2^" + std::to_string(kWindowLog) +
                    " bytes dtrain-data decompresses with; decompress it first (zstd -d --long=" + std::to_string(log) +
                    " FILE) or recompress it without --long");
  }
  ZSTD_DStream* ds_ = nullptr;
  std::size_t pending_ = 0;  // ZSTD_decompressStream's last hint: 0 once a frame is complete
  std::uint64_t frames_ = 0;
};

// xz: liblzma's stream decoder over concatenated streams (as xz -d reads them), its memory bounded.
class XzStream final : public CompressedStream {
 public:
  XzStream(const std::string& path, FilePtr f) : CompressedStream(path, std::move(f), Compression::xz) {
    if (lzma_stream_decoder(&s_, kMemoryLimit, LZMA_CONCATENATED) != LZMA_OK)
      throw UserError("input file '" + path + "': liblzma cannot start a decompression");
  }
  ~XzStream() override { lzma_end(&s_); }

 private:
  static constexpr std::uint64_t kMemoryLimit = std::uint64_t{256} << 20;  // xz -9 needs 65 MiB
  std::size_t decode(char* buf, std::size_t n) override {
    s_.next_in = in();
    s_.avail_in = in_size();
    s_.next_out = reinterpret_cast<std::uint8_t*>(buf);
    s_.avail_out = n;
    const lzma_ret rc = lzma_code(&s_, at_file_end() ? LZMA_FINISH : LZMA_RUN);
    consume(in_size() - s_.avail_in);
    const std::size_t out = n - s_.avail_out;
    switch (rc) {
      case LZMA_OK: break;
      case LZMA_STREAM_END: end(); break;
      case LZMA_BUF_ERROR: truncated();
      case LZMA_MEMLIMIT_ERROR:
        throw UserError("input file '" + path_ + "' is xz data that needs more than 256 MiB of memory to decompress; decompress it "
                        "first (xz -d FILE)");
      case LZMA_FORMAT_ERROR: corrupt("liblzma: not xz data where a stream should start");
      case LZMA_OPTIONS_ERROR: corrupt("liblzma: options this liblzma does not know");
      default: corrupt("liblzma: code " + std::to_string(static_cast<int>(rc)));
    }
    return out;
  }
  lzma_stream s_ = LZMA_STREAM_INIT;
};

// bzip2: every stream in turn (bzip2 -d's reading of concatenated streams, pbzip2's output).
class Bzip2Stream final : public CompressedStream {
 public:
  Bzip2Stream(const std::string& path, FilePtr f) : CompressedStream(path, std::move(f), Compression::bzip2) { start(); }
  ~Bzip2Stream() override { BZ2_bzDecompressEnd(&s_); }

 private:
  void start() {
    s_ = bz_stream{};
    if (BZ2_bzDecompressInit(&s_, 0, 0) != BZ_OK) throw UserError("input file '" + path_ + "': libbz2 cannot start a decompression");
  }
  std::size_t decode(char* buf, std::size_t n) override {
    s_.next_in = const_cast<char*>(reinterpret_cast<const char*>(in()));
    s_.avail_in = static_cast<unsigned>(std::min<std::size_t>(in_size(), 1u << 30));
    s_.next_out = buf;
    s_.avail_out = static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30));
    const unsigned before = s_.avail_in;
    const int rc = BZ2_bzDecompress(&s_);
    consume(before - s_.avail_in);
    const std::size_t out = static_cast<std::size_t>(s_.next_out - buf);
    if (rc == BZ_STREAM_END) {
      BZ2_bzDecompressEnd(&s_);
      if (another_follows())
        start();
      else
        end(), start();  // a stream to end in the destructor
    } else if (rc != BZ_OK) {
      corrupt("libbz2: code " + std::to_string(rc));
    } else if (out == 0 && before == s_.avail_in && at_file_end()) {
      truncated();  // the stream has not ended and nothing is left to read
    }
    return out;
  }
  bz_stream s_{};
};

}  // namespace

Compression compression_of(const std::string& path) {
  for (const Format& f : kFormats)
    if (f.c != Compression::none && ends_with(path, f.suffix)) return f.c;
  return Compression::none;
}

const char* compression_suffix(Compression c) { return format(c).suffix; }

std::unique_ptr<InputStream> open_input(const std::string& path) {
  FilePtr f = open_file(path);
  unsigned char magic[10] = {};
  const std::size_t n = std::fread(magic, 1, sizeof magic, f.get());
  if (std::ferror(f.get())) cannot_read(path, std::strerror(errno));
  std::rewind(f.get());
  const Compression named = compression_of(path), found = sniff(magic, n);
  if (named != Compression::none && found != named)
    throw UserError("input file '" + path + "' ends in " + format(named).suffix + " but is not " + format(named).name + " data" +
                    (found != Compression::none ? std::string(" (it is ") + format(found).name + ")" : std::string(" (no ") + format(named).name + " magic bytes)") +
                    "; rename it to what it holds, or decompress it");
  if (named == Compression::none && found != Compression::none)
    throw UserError("input file '" + path + "' holds " + format(found).name + " data, but its name does not end in " + format(found).suffix +
                    " (dtrain-data picks the decompressor by the name); rename it to end in " + format(found).suffix);
  switch (named) {
    case Compression::gzip: return std::make_unique<GzipStream>(path, std::move(f));
    case Compression::zstd: return std::make_unique<ZstdStream>(path, std::move(f));
    case Compression::xz: return std::make_unique<XzStream>(path, std::move(f));
    case Compression::bzip2: return std::make_unique<Bzip2Stream>(path, std::move(f));
    case Compression::none: break;
  }
  return std::make_unique<PlainStream>(path, std::move(f));
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
