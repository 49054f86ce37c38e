// A model-weights file: one HDF5 file with one dataset per parameter tensor, named as in the tensor
// table ("wte", "h0.qkv_w", ...) with its global shape. Readable by h5dump and h5py without dtrain.
// Written at the end of training from a rank that holds the whole model; read by `dtrain generate`.
// The root attribute "tokenizer" holds the identity of the tokenizer it was trained with (src/tokenizer);
// ckpt-consolidate's files carry it too, and a file without it is of the byte tokenizer.
#pragma once
#include <string>

#include "plan/tensor_table.hpp"

namespace dtrain {

// Writes every tensor of `table` (which must be unsharded) from fp32 values in arena order (host), via
// a temporary file renamed into place.
void write_weights(const std::string& path, const TensorTable& table, const float* values, const std::string& tokenizer);
// Reads every tensor of `table` into values (table.total() floats, arena order); a missing dataset or
// a shape mismatch is a UserError naming both.
void read_weights(const std::string& path, const TensorTable& table, float* values);
// The file's tokenizer identity ("byte" when it has none).
std::string weights_tokenizer(const std::string& path);

}  // namespace dtrain
