// The tokenizer files of an exported model, as Hugging Face loads them beside config.json: for a
// byte-level BPE (data.tokenizer gpt2 or hf), tokenizer.json (a BPE model with GPT-2's ByteLevel
// pre-tokenizer, post-processor and decoder) with vocab.json and merges.txt; for sentencepiece, the
// model as tokenizer.model. The byte tokenizer has no Hugging Face form.
#pragma once
#include <string>

namespace dtrain {

// Writes the files of the tokenizer `spec` (data.tokenizer syntax) into dir; returns their names
// ("tokenizer.json, vocab.json, merges.txt"). UserError naming what cannot be read or written.
std::string write_hf_tokenizer_files(const std::string& spec, const std::string& dir);

}  // namespace dtrain
