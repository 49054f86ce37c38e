// safetensors Reader and Writer: header through nlohmann-json, tensor bytes through stdio.
#include "hf/safetensors.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ckpt/checksum.hpp"
#include "common/bf16.hpp"
#include "common/bounded_json.hpp"
#include "common/error.hpp"
#include "common/fp16.hpp"
#include "common/round16.hpp"

namespace dtrain::safetensors {
// The format is little-endian; tensors are read and written as the machine holds them.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian machine");
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit (100 MB)

bool parse_dtype(const std::string& s, DType& d) {
  if (s == "F32") d = DType::f32;
  else if (s == "BF16") d = DType::bf16;
  else if (s == "F16") d = DType::f16;
  else return false;
  return true;
}

}  // namespace

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
  }
  return "?";
}

std::size_t dtype_bytes(DType d) { return d == DType::f32 ? 4 : 2; }

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Reader::Reader(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw UserError("cannot open '" + path + "': " + std::strerror(errno));
  auto bad = [&](const std::string& why) {
    std::fclose(file_);
    file_ = nullptr;
    return UserError("'" + path + "' is not a readable safetensors file: " + why);
  };
  if (std::fseek(file_, 0, SEEK_END) != 0) throw bad("cannot seek");
  const long size_long = std::ftell(file_);
  const std::uint64_t size = size_long < 0 ? 0 : static_cast<std::uint64_t>(size_long);
  std::rewind(file_);
  unsigned char len_bytes[8];
  if (size < 8 || std::fread(len_bytes, 1, 8, file_) != 8) throw bad("shorter than its 8-byte header length");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8)
    throw bad("its header length " + std::to_string(header_len) + " is larger than the file or the format's 100 MB limit");
  std::string header(header_len, '\0');
  if (std::fread(header.data(), 1, header_len, file_) != header_len) throw bad("cannot read its header");
  data_start_ = 8 + header_len;
  const std::uint64_t data_size = size - data_start_;
  nlohmann::json json;
  if (std::string error; !parse_bounded_json(header, json, error)) throw bad("its header is not JSON (" + error + ")");
  if (!json.is_object()) throw bad("its header is not a JSON object");
  for (const auto& [key, value] : json.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) throw bad("__metadata__ value '" + k + "' is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "' ";
    TensorInfo t;
    t.name = key;
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
      throw bad(where + "lacks dtype, shape or data_offsets");
    if (!value["dtype"].is_string()) throw bad(where + "has a dtype that is not a string");
    const std::string dtype = value["dtype"].get<std::string>();
    if (!parse_dtype(dtype, t.dtype)) throw bad(where + "has dtype " + dtype + "; dtrain reads F32, BF16 and F16");
    if (!value["shape"].is_array()) throw bad(where + "has a shape that is not a list");
    for (const auto& d : value["shape"]) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (1ull << 40)) throw bad(where + "has a dimension that is not a size");
      t.shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
    }
    const auto& off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad(where + "has data_offsets that are not [begin, end]");
    t.begin = off[0].get<std::uint64_t>();
    t.end = off[1].get<std::uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      throw bad(where + "has data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] outside the " +
                std::to_string(data_size) + " data bytes (truncated file?)");
    // Checked: a shape from the file can ask for more bytes than 64 bits count ([2^32, 2^32] of F16).
    std::uint64_t bytes = dtype_bytes(t.dtype);
    bool overflow = false;
    for (auto d : t.shape) overflow = overflow || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes);
    if (overflow)
      throw bad(where + "has shape " + shape_text(t.shape) + " of " + dtype + ", more bytes than 64 bits count (corrupt header?)");
    if (bytes != t.end - t.begin)
      throw bad(where + "holds " + std::to_string(t.end - t.begin) + " bytes, but its shape " + shape_text(t.shape) + " of " +
                dtype + " needs " + std::to_string(bytes));
    tensors_.push_back(std::move(t));
  }
  // As the format's own reader checks: the tensors tile the data bytes exactly, in offset order, with no
  // overlap, no gap and nothing after the last one.
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t covered = 0;  // data bytes [0, covered) belong to the tensors so far
  const TensorInfo* previous = nullptr;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& t = tensors_[i];
    if (t.begin < covered) throw bad("tensors '" + previous->name + "' and '" + t.name + "' overlap");
    if (t.begin > covered)
      throw bad("data bytes [" + std::to_string(covered) + ", " + std::to_string(t.begin) + ") before tensor '" + t.name +
                "' belong to no tensor (a gap in the data)");
    covered = t.end;
    previous = &t;
    index_[t.name] = i;
  }
  if (covered != data_size)
    throw bad(std::to_string(data_size - covered) + " data bytes after the last tensor belong to no tensor (trailing bytes)");
}

Reader::~Reader() {
  if (file_) std::fclose(file_);
}

const TensorInfo* Reader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> Reader::read(const TensorInfo& t) const {
  const std::size_t n = static_cast<std::size_t>(t.numel());
  std::vector<unsigned char> raw(t.end - t.begin);
  const ssize_t got = raw.empty() ? 0 : ::pread(fileno(file_), raw.data(), raw.size(), static_cast<off_t>(data_start_ + t.begin));
  if (got != static_cast<ssize_t>(raw.size()))
    throw UserError("'" + path_ + "': cannot read tensor '" + t.name + "' (" + (got < 0 ? std::strerror(errno) : "file shorter than its header says") + ")");
  std::vector<float> out(n);
  if (t.dtype == DType::f32) {
    if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());  // an empty vector's data() may be null
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t bits = static_cast<std::uint16_t>(raw[2 * i] | raw[2 * i + 1] << 8);
      out[i] = t.dtype == DType::bf16 ? to_float(bf16{bits}) : to_float(fp16{bits});
    }
  }
  return out;
}

std::map<std::string, std::string> read_index(const std::string& text, const std::string& path, const std::string& dir) {
  nlohmann::json j;
  if (std::string error; !parse_bounded_json(text, j, error)) throw UserError("'" + path + "' is not JSON: " + error);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw UserError("'" + path + "' has no weight_map object");
  std::map<std::string, std::string> located;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw UserError("'" + path + "': the file of tensor '" + name + "' is not a string");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      throw UserError("'" + path + "': tensor '" + name + "' is in '" + f + "', which is not a file name in " + dir);
    located[name] = f;
  }
  return located;
}

Writer::Writer(std::string path, std::vector<PlannedTensor> tensors, DType dtype, const std::map<std::string, std::string>& metadata)
    : file_(std::make_unique<StagedFile>(path, "safetensors file")), tensors_(std::move(tensors)), dtype_(dtype) {
  nlohmann::ordered_json header;
  header["__metadata__"] = metadata;
  std::uint64_t at = 0;
  for (const auto& t : tensors_) {
    std::uint64_t bytes = dtype_bytes(dtype);
    for (auto d : t.shape) bytes *= static_cast<std::uint64_t>(d);
    header[t.name] = {{"dtype", dtype_name(dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  file_->write(len_bytes, 8);
  file_->write(text);
}

Writer::~Writer() = default;

void Writer::write(const std::string& name, const float* values, std::size_t count) {
  if (next_ >= tensors_.size() || tensors_[next_].name != name) fatal("safetensors::Writer: '" + name + "' written out of order");
  std::size_t n = 1;
  for (auto d : tensors_[next_].shape) n *= static_cast<std::size_t>(d);
  if (n != count) fatal("safetensors::Writer: '" + name + "' has " + std::to_string(count) + " values, its shape " + std::to_string(n));
  if (!h5::all_finite(values, count))
    throw UserError("tensor '" + name + "' holds non-finite values (NaN or infinity); it is not exported");
  if (dtype_ == DType::f32) {
    file_->write(values, count * sizeof(float));
  } else {
    // Rounded to nearest even; a value the 16-bit type cannot hold (beyond 65504 in float16) is refused.
    const bool f16 = dtype_ == DType::f16;
    std::vector<std::uint16_t> rounded(count);
    const std::size_t bad = round_to_16(f16 ? Type16::fp16 : Type16::bf16, values, count, rounded.data());
    if (bad < count)
      throw UserError("tensor '" + name + "' holds a value beyond " + (f16 ? "float16's range (65504)" : "bfloat16's range") + " (" +
                      std::to_string(values[bad]) + "); export it with --dtype fp32");
    file_->write(rounded.data(), count * sizeof(std::uint16_t));
  }
  ++next_;
}

void Writer::finish() {
  if (next_ != tensors_.size()) fatal("safetensors::Writer: finished after " + std::to_string(next_) + " of its tensors");
  file_->publish();
}

}  // namespace dtrain::safetensors
