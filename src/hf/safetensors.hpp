// safetensors files (the Hugging Face weights format): an 8-byte little-endian header length, a JSON
// header {"__metadata__": {...}, NAME: {"dtype", "shape", "data_offsets": [begin, end]}, ...} and the
// tensors' raw little-endian bytes. The header is parsed with nlohmann-json; the bytes are ours.
// Reading checks the whole header at open (sizes, dtypes, offsets inside the file, no overlaps), so a
// damaged or foreign file is one UserError naming the file and the tensor.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/staged_file.hpp"

namespace dtrain::safetensors {

// The element types dtrain reads and writes: F32, BF16, F16.
enum class DType { f32, bf16, f16 };
const char* dtype_name(DType d);  // "F32", "BF16", "F16"
std::size_t dtype_bytes(DType d);

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range in the data part (after the header)
  std::int64_t numel() const;
};

// "[768, 2304]"
std::string shape_text(const std::vector<std::int64_t>& shape);

// One file opened for reading; tensors are read on demand (pread), converted to fp32.
class Reader {
 public:
  explicit Reader(const std::string& path);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader();
  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in the order of their data
  const TensorInfo* find(const std::string& name) const;                // null when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<float> read(const TensorInfo& t) const;

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// model.safetensors.index.json's weight_map (tensor name -> file name in `dir`) from its text (read
// from `path`, named in errors); UserError unless it is JSON with a weight_map of plain file names.
std::map<std::string, std::string> read_index(const std::string& text, const std::string& path, const std::string& dir);

struct PlannedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

// One file written in a single pass: the header from the whole list first (tensors in the given order,
// one dtype), then each tensor's values in that order, into PATH.tmp, renamed to PATH by finish().
// The header is padded with spaces to a multiple of 8 bytes, so every tensor starts 8-byte aligned.
// The same tensors, values, dtype and metadata give the same bytes.
class Writer {
 public:
  Writer(std::string path, std::vector<PlannedTensor> tensors, DType dtype, const std::map<std::string, std::string>& metadata);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer();  // an unfinished file is removed (it is staged: common/staged_file)
  // The next tensor's values (count must be its element count); rounded to bf16 when the dtype says so.
  // Non-finite values are refused.
  void write(const std::string& name, const float* values, std::size_t count);
  void finish();

 private:
  std::unique_ptr<StagedFile> file_;
  std::vector<PlannedTensor> tensors_;
  DType dtype_;
  std::size_t next_ = 0;
};

}  // namespace dtrain::safetensors
