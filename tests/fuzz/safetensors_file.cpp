// Fuzz target: a safetensors file, opened as the import opens it (safetensors::Reader checks the whole
// header) and every tensor in it read.
#include "fuzz/fuzz_target.hpp"
#include "hf/safetensors.hpp"

DTRAIN_FUZZ_TARGET(safetensors_file) {
  const std::string path = dtrain::fuzz::write_scratch("model.safetensors", {reinterpret_cast<const char*>(data), size});
  const dtrain::safetensors::Reader r(path);
  for (const auto& t : r.tensors()) (void)r.read(t);
  for (const auto& t : r.tensors()) (void)r.find(t.name);
}
