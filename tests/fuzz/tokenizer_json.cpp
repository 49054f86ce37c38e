// Fuzz target: a Hugging Face tokenizer.json, loaded as data.tokenizer=hf:DIR loads it (make_tokenizer),
// then used (tokenizer_common.hpp).
#include <filesystem>

#include "fuzz/fuzz_target.hpp"
#include "fuzz/tokenizer_common.hpp"

DTRAIN_FUZZ_TARGET(tokenizer_json) {
  const std::string dir = dtrain::fuzz::scratch_dir() + "/hf-tokenizer";
  std::filesystem::create_directories(dir);
  dtrain::fuzz::write_scratch("hf-tokenizer/tokenizer.json", {reinterpret_cast<const char*>(data), size});
  auto tok = dtrain::make_tokenizer("hf:" + dir);
  dtrain::fuzz::exercise_tokenizer(*tok);
}
