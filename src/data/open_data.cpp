// open_data: a stream's sources by format (dtrain token files or Megatron datasets cut by data.split),
// with their checks, gathered into a DataBlend.
#include "data/open_data.hpp"

#include <cmath>
#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include "common/error.hpp"
#include "data/batch_sampler.hpp"
#include "data/loss_mask_file.hpp"
#include "data/megatron_dataset.hpp"
#include "data/token_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {
namespace {

std::unique_ptr<TokenSource> open_token_file(const std::string& prefix, const std::string& stream, const std::string& spec,
                                             const std::string& tokenizer, int vocab_size, int seq_length) {
  const std::string path = prefix + "." + stream + ".bin";
  auto file = std::make_unique<TokenFile>(TokenFile::open(path, vocab_size));
  check_made_with(spec, tokenizer, file->tokenizer(), "token file '" + path + "'");
  check_sequence_fits(*file, seq_length, "token file '" + path + "'");
  // A loss mask beside the tokens (dtrain-data --sft) comes with them, for both streams or for neither:
  // a mask missing beside one would make that stream count every token without a word.
  std::error_code ec;
  const std::string mask = loss_mask_path(path);
  for (const char* other : {"train", "val"}) {
    const std::string other_tokens = prefix + "." + other + ".bin", other_mask = loss_mask_path(other_tokens);
    if (other == stream || !std::filesystem::exists(other_tokens, ec)) continue;
    const bool here = std::filesystem::exists(mask, ec), there = std::filesystem::exists(other_mask, ec);
    if (here != there)
      throw UserError("loss mask file '" + (here ? other_mask : mask) + "' is missing, but '" + (here ? mask : other_mask) +
                      "' is there: a data set with a loss mask needs it for both splits; re-make both with dtrain-data --sft");
  }
  if (std::filesystem::exists(mask, ec)) file->attach_loss_mask(mask, path);
  return file;
}

std::unique_ptr<TokenSource> open_megatron(const std::string& prefix, const std::string& stream, const DataSplit& split,
                                           int vocab_size, int seq_length, ScanShare share) {
  auto data = std::make_unique<MegatronDataset>(MegatronDataset::open(prefix));
  // A loss mask dataset beside it (dtrain-data --sft): both of its files, or neither.
  std::error_code ec;
  const std::string mask = megatron_loss_mask_prefix(prefix);
  const bool idx = std::filesystem::exists(mask + ".idx", ec), bin = std::filesystem::exists(mask + ".bin", ec);
  if (idx != bin)
    throw UserError("loss mask dataset '" + mask + "' has " + (idx ? ".idx but no .bin" : ".bin but no .idx") +
                    " beside Megatron dataset '" + prefix + "'; a loss mask needs both of its files: re-make them with dtrain-data --sft, "
                    "or remove the one left");
  if (idx) data->attach_loss_mask(mask);
  const int part = stream == "train" ? 0 : 1;
  const auto [first, last] = split_documents(data->num_documents(), split, part);
  data->keep_documents(first, last);
  std::ostringstream what;
  what << "the " << (part == 0 ? "train" : "valid") << " part of Megatron dataset '" << prefix << "' (documents [" << first
       << ", " << last << ") of " << data->num_documents() << " by data.split=" << split << ")";
  check_sequence_fits(*data, seq_length, what.str());
  const auto n = static_cast<unsigned __int128>(data->size());
  data->check_tokens(vocab_size, static_cast<std::uint64_t>(n * share.index / share.count),
                     static_cast<std::uint64_t>(n * (share.index + 1) / share.count));
  return data;
}

}  // namespace

std::pair<std::uint64_t, std::uint64_t> split_documents(std::uint64_t num_documents, const DataSplit& split, int part) {
  const double total = split.weights[0] + split.weights[1] + split.weights[2];
  const auto boundary = [&](int k) {
    double before = 0.0;
    for (int i = 0; i < k; ++i) before += split.weights[i];
    return k == 3 ? num_documents : static_cast<std::uint64_t>(std::llround(static_cast<double>(num_documents) * before / total));
  };
  return {boundary(part), boundary(part + 1)};
}

DataBlend open_data(const DataConfig& data, const std::string& tokenizer, const std::string& stream, int vocab_size, int seq_length,
                    ScanShare share) {
  std::vector<std::unique_ptr<TokenSource>> sources;
  std::vector<double> weights;
  for (const BlendPart& p : parse_blend(data.path)) {
    sources.push_back(data.format == DataFormat::megatron
                          ? open_megatron(p.prefix, stream, data.split, vocab_size, seq_length, share)
                          : open_token_file(p.prefix, stream, data.tokenizer, tokenizer, vocab_size, seq_length));
    weights.push_back(p.weight);
  }
  return DataBlend(std::move(sources), weights);
}

}  // namespace dtrain
