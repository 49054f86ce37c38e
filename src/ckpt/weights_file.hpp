// A model-weights file: one HDF5 file with one dataset per parameter tensor, named as in the tensor
// table ("wte", "h0.qkv_w", ...) with its global shape. Readable by h5dump and h5py without dtrain.
// Written at the end of training (model-final.h5), by ckpt-consolidate (--out FILE.h5, --import-hf);
// read by `dtrain generate`, by checkpoint.init_from (any layout: each rank reads the hyperslabs of its
// slices) and by ckpt-consolidate --export-hf.
// Root attributes: "tokenizer", the identity of the tokenizer it was trained with (src/tokenizer; absent
// = byte), and "config", the resolved input file of its model (absent in files of older versions).
#pragma once
#include <string>

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

// Writes every tensor of `table` (which must be unsharded) from fp32 values in arena order (host), via
// a temporary file renamed into place; stored as fp32 or rounded to bf16.
void write_weights(const std::string& path, const TensorTable& table, const float* values, const WeightsMeta& meta,
                   h5::Stored stored = h5::Stored::f32);
// Reads every tensor of `table` into values (table.total() floats, arena order); a missing dataset or
// a shape mismatch is a UserError naming both.
void read_weights(const std::string& path, const TensorTable& table, float* values);
WeightsMeta weights_meta(const std::string& path);
// bf16 when every weight of the file (its root datasets) is stored as bf16, else fp32.
h5::Stored weights_stored(const std::string& path);
// A rank's slice of every tensor of its plan (and, in bf16 runs, its master weights) from the file's
// global tensors (load_slices: the hyperslabs of its parameter ranges only); a missing tensor or
// another shape is a UserError naming the file and the tensor.
void load_rank_weights(const std::string& path, RankState& state);

}  // namespace dtrain
