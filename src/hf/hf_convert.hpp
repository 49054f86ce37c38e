// Hugging Face model directories in and out (ckpt-consolidate --export-hf / --import-hf):
//   DIR/config.json                          the architecture (hf_model.hpp)
//   DIR/model.safetensors                    every tensor, or, past the shard size limit,
//   DIR/model-00001-of-0000N.safetensors ... the tensors in model order, cut into files of at most the
//   DIR/model.safetensors.index.json         limit (one tensor may exceed it), and the index
//                                            {"metadata": {"total_size"}, "weight_map": {name: file}}
// Each file lists its tensors sorted by name with {"format": "pt"} metadata. Export is deterministic:
// the same weights give the same bytes, so import -> export reproduces a directory dtrain exported.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/convert.hpp"
#include "ckpt/h5_file.hpp"
#include "comm/host_comm.hpp"
#include "config/config.hpp"
#include "hf/hf_model.hpp"
#include "hf/safetensors.hpp"

namespace dtrain {

// A model's global weights, wherever they are stored: its configuration, the identity of its tokenizer,
// how its values are stored, and each global tensor by name (shape checked against the configuration).
struct ModelWeights {
  Config cfg;
  std::string tokenizer;
  h5::Stored stored = h5::Stored::f32;
  std::string what;  // "checkpoint 'DIR'", "weights file 'F'"
  std::function<std::vector<std::int64_t>(const std::string& name)> shape;
  std::function<std::vector<float>(const std::string& name)> tensor;
};
// The checkpoint's parameters (the fp32 master weights of a bf16 run); reader must outlive the result.
ModelWeights checkpoint_weights(const CheckpointReader& reader);
// A weights file with a stored configuration (model-final.h5, ckpt-consolidate --out or --import-hf).
ModelWeights file_weights(const std::string& path);

struct HfExportOptions {
  safetensors::DType dtype = safetensors::DType::f32;
  std::uint64_t max_shard_bytes = 5'000'000'000ull;  // transformers' default max_shard_size "5GB"
  std::vector<std::pair<std::string, std::string>> extra_files;  // (name, contents) rank 0 writes beside config.json
};

// Collective over comm: writes DIR (created; it must not hold files already) with the safetensors
// files split over the ranks, config.json and the index by rank 0. On failure nothing it wrote stays.
void export_hf(HostComm comm, const ModelWeights& weights, const std::string& dir, const HfExportOptions& options,
               const Progress& progress);

// One process: reads DIR, maps its tensors onto dtrain's, and writes the weights file `out` (tensors
// stored as bf16 when every one in DIR is BF16, else fp32; the configuration as an input file). The
// tokenizer identity recorded is `tokenizer` if given, else config.json's dtrain_tokenizer, else
// kUnrecordedTokenizer. A missing tensor, a wrong shape or a tensor dtrain's model would not use is a
// UserError naming the file and the tensor. Returns the model's configuration.
Config import_hf(const std::string& dir, const std::string& out, const std::string& tokenizer, const Progress& progress);

// The model DIR/config.json describes (config_from_hf); UserError where there is none or it is refused.
HfModelConfig read_hf_model_config(const std::string& dir);

// "5GB", "500MB", "2GiB", "1000000" (bytes) -> bytes; UserError otherwise.
std::uint64_t parse_byte_size(const std::string& text, const std::string& option);

}  // namespace dtrain
