// Fuzz target: GPT-2's encoder.json and vocab.bpe (the format of Hugging Face's vocab.json and
// merges.txt, read by the same function), loaded as data.tokenizer=gpt2:DIR loads them, then used
// (tokenizer_common.hpp). Input: encoder.json, "\n#dtrain-fuzz-next-file\n", vocab.bpe.
#include <filesystem>

#include "fuzz/fuzz_target.hpp"
#include "fuzz/tokenizer_common.hpp"

DTRAIN_FUZZ_TARGET(vocab_merges) {
  const auto parts = dtrain::fuzz::split(data, size, "\n#dtrain-fuzz-next-file\n", 2);
  const std::string dir = dtrain::fuzz::scratch_dir() + "/gpt2-tokenizer";
  std::filesystem::create_directories(dir);
  dtrain::fuzz::write_scratch("gpt2-tokenizer/encoder.json", parts[0]);
  dtrain::fuzz::write_scratch("gpt2-tokenizer/vocab.bpe", parts[1]);
  auto tok = dtrain::make_tokenizer("gpt2:" + dir);
  dtrain::fuzz::exercise_tokenizer(*tok);
}
