// The tokenizer files of an exported model, as Hugging Face loads them beside config.json: for a
// byte-level BPE (data.tokenizer gpt2 or hf), tokenizer.json (a BPE model with GPT-2's ByteLevel
// pre-tokenizer, post-processor and decoder) with vocab.json and merges.txt; for sentencepiece, the
// model as tokenizer.model. The byte tokenizer has no Hugging Face form.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// The files of the tokenizer `spec` (data.tokenizer syntax) as (name, contents), for the export to
// write beside config.json. UserError naming what cannot be read, and for the byte tokenizer.
std::vector<std::pair<std::string, std::string>> hf_tokenizer_files(const std::string& spec);

}  // namespace dtrain
