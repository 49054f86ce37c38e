// Fuzz target: model.safetensors.index.json, as the import reads it (safetensors::read_index).
#include "fuzz/fuzz_target.hpp"
#include "hf/safetensors.hpp"

DTRAIN_FUZZ_TARGET(safetensors_index) {
  (void)dtrain::safetensors::read_index(std::string(reinterpret_cast<const char*>(data), size),
                                        "model.safetensors.index.json", "model-dir");
}
