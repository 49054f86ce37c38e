// Reading a user's corpus file as a stream of bytes, plain or compressed (chosen by the name's ending:
// .gz through zlib, .zst through libzstd, .xz through liblzma, .bz2 through libbz2, anything else as it
// is; the first bytes must agree: a name that promises a format the bytes do not hold, or compressed
// bytes under a plain name, is refused), and cutting it into lines. Concatenated members, frames and
// streams are read as the formats' own tools read them. Every problem (unreadable file, corrupt or
// truncated compressed data, other bytes after it, a line beyond the bound) is a UserError naming the
// file (and the line): compressed data never just ends early.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

enum class Compression { none, gzip, zstd, xz, bzip2 };

// By the file name: ".gz" gzip, ".zst" zstd, ".xz" xz, ".bz2" bzip2, else none.
Compression compression_of(const std::string& path);
// The name's ending of a compression ("" for none).
const char* compression_suffix(Compression c);

class InputStream {
 public:
  virtual ~InputStream() = default;
  // Up to `n` decompressed bytes into buf; 0 at the end of the stream.
  virtual std::size_t read(char* buf, std::size_t n) = 0;
  // Bytes of the file consumed so far (compressed bytes for a compressed file), for progress.
  virtual std::uint64_t file_bytes_read() const = 0;
  const std::string& path() const { return path_; }

 protected:
  explicit InputStream(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

std::unique_ptr<InputStream> open_input(const std::string& path);

// The lines of a stream ('\n' ends a line, a trailing "\r" is kept; the last line may lack its '\n').
class LineReader {
 public:
  // A line longer than max_line_bytes is a UserError (a corrupt or unsplit file must not take all memory).
  explicit LineReader(std::unique_ptr<InputStream> in, std::size_t max_line_bytes = std::size_t{1} << 28);
  // The next line without its '\n', valid until the next call; false at the end.
  bool next(std::string_view& line);
  std::uint64_t line_number() const { return line_number_; }  // 1-based, of the line next() gave
  bool newline() const { return newline_; }                   // whether that line ended with '\n' 
  const InputStream& stream() const { return *in_; }

 private:
  bool fill();  // more bytes into buf_ after the unread ones; false at the end of the stream
  std::unique_ptr<InputStream> in_;
  std::size_t max_line_;
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;  // unread bytes of buf_
  bool eof_ = false, newline_ = false;
  std::uint64_t line_number_ = 0;
};

}  // namespace dtrain
