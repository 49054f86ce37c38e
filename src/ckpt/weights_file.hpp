// A model-weights file: one HDF5 file with one dataset per parameter tensor, named as in the tensor
// table ("wte", "h0.qkv_w", ...) with its global shape. Readable by h5dump and h5py without dtrain.
// Written at the end of training (model-final.h5, streamed in slabs), by ckpt-consolidate --import-hf;
// read by `dtrain generate`, by checkpoint.init_from (any layout: each rank reads the hyperslabs of its
// slices) and by ckpt-consolidate --export-hf.
// Root attributes: "tokenizer", the identity of the tokenizer it was trained with (src/tokenizer; absent
// = byte), and "config", the resolved input file of its model (absent in files of older versions).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/h5_file.hpp"
#include "plan/tensor_table.hpp"

namespace dtrain {

// The tokenizer identity of weights whose tokenizer nobody recorded (imported from Hugging Face without
// --tokenizer): users of the file warn instead of comparing.
inline constexpr const char* kUnrecordedTokenizer = "unrecorded";

struct WeightsMeta {
  std::string tokenizer = "byte";
  std::string config_text;  // "" when the file has none
};

// A weights file written tensor by tensor, each in parts (hyperslabs), into its staged temporary
// (common/staged_file), published as PATH by finish() once every write, the close and the fsync
// succeeded; a writer destroyed unfinished removes the temporary. Any failure is a UserError "the
// weights file 'PATH' was not written: ..." (the step and the system's cause: disk full).
class WeightsWriter {
 public:
  WeightsWriter(const std::string& path, const WeightsMeta& meta, h5::Stored stored = h5::Stored::f32);
  WeightsWriter(const WeightsWriter&) = delete;
  WeightsWriter& operator=(const WeightsWriter&) = delete;
  ~WeightsWriter();
  // Elements [begin, begin + count) (flat, row-major) of tensor `name` of global shape `shape`; a new
  // name starts the next dataset (a tensor's parts come together, in any order).
  void write(const std::string& name, const std::vector<long>& shape, std::size_t begin, std::size_t count, const float* values);
  void finish();

 private:
  [[noreturn]] void failed(const std::string& why);
  std::string path_, tmp_;
  h5::Stored stored_;
  std::optional<h5::File> file_;
  std::optional<h5::Dataset> dataset_;  // of the tensor being written
  std::string tensor_;
};

// Writes every tensor of `table` (which must be unsharded) from fp32 values in arena order (host), via
// a temporary file renamed into place; stored as fp32 or rounded to bf16 or fp16.
void write_weights(const std::string& path, const TensorTable& table, const float* values, const WeightsMeta& meta,
                   h5::Stored stored = h5::Stored::f32);
// Reads every tensor of `table` into values (table.total() floats, arena order); a missing dataset, a
// shape mismatch or a non-finite value is a UserError naming the file and the tensor.
void read_weights(const std::string& path, const TensorTable& table, float* values);
WeightsMeta weights_meta(const std::string& path);
// The 16-bit type every weight of the file (its root datasets) is stored in (bf16 or fp16), else fp32.
h5::Stored weights_stored(const std::string& path);
// A rank's slice of every tensor of its plan (and, in bf16 runs, its master weights) from the file's
// global tensors (load_slices: the hyperslabs of its parameter ranges only); a missing tensor or
// another shape is a UserError naming the file and the tensor.
void load_rank_weights(const std::string& path, RankState& state);

}  // namespace dtrain
