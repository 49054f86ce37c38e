// Fuzz target: a SentencePiece model file, loaded as data.tokenizer=sentencepiece:MODEL loads it
// (libsentencepiece's loader, through dtrain's wrapper), then used (tokenizer_common.hpp).
#include "fuzz/fuzz_target.hpp"
#include "fuzz/tokenizer_common.hpp"

DTRAIN_FUZZ_TARGET(sentencepiece_model) {
  const std::string path = dtrain::fuzz::write_scratch("fuzz.model", {reinterpret_cast<const char*>(data), size});
  auto tok = dtrain::make_tokenizer("sentencepiece:" + path);
  dtrain::fuzz::exercise_tokenizer(*tok);
}
