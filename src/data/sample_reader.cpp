// SampleReader: windows or packed bins, then the loss mask, document starts and position ids of each.
#include "data/sample_reader.hpp"

#include <algorithm>
#include <cstdio>

#include "common/counter_rng.hpp"
#include "common/error.hpp"
#include "data/batch_sampler.hpp"

namespace dtrain {

SampleReader::SampleReader(const DataBlend& blend, const SampleRules& rules) : blend_(blend), rules_(rules) {
  const bool documents = rules.reset_position_ids || rules.reset_attention_mask || rules.eod_mask_loss || rules.pack;
  if (documents && !rules.eod)
    throw UserError("data.reset_position_ids, reset_attention_mask, eod_mask_loss and pack find documents by the end-of-document "
                    "token, which data.tokenizer lacks (the byte tokenizer has none); use gpt2, hf:DIR or sentencepiece data made "
                    "with dtrain-data --append-eod or --sft");
  masked_ = rules.eod_mask_loss || rules.pack;
  for (std::size_t i = 0; i < blend.num_sources(); ++i) masked_ = masked_ || blend.source(i).has_loss_mask();
  if (rules.pack)
    for (std::size_t i = 0; i < blend.num_sources(); ++i)
      packed_.push_back(std::make_unique<PackedDocuments>(blend.source(i), *rules.eod, rules.seq_length + 1));
}

std::string SampleReader::describe() const {
  std::string parts;
  const auto add = [&](const std::string& p) { parts += (parts.empty() ? "" : ", ") + p; };
  bool data_mask = false;
  for (std::size_t i = 0; i < blend_.num_sources(); ++i) data_mask = data_mask || blend_.source(i).has_loss_mask();
  if (data_mask) add("the data's loss mask");
  if (rules_.eod_mask_loss) add("end-of-document inputs masked");
  if (rules_.reset_attention_mask) add("attention inside documents");
  if (rules_.reset_position_ids) add("positions reset per document");
  for (const auto& p : packed_) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%llu documents packed into %llu samples (%.1f%% padding)",
                  static_cast<unsigned long long>(p->num_documents()), static_cast<unsigned long long>(p->num_bins()), 100.0 * p->padding());
    add(buf);
  }
  return parts;
}

std::uint64_t SampleReader::fill(std::uint64_t seed, const std::string& stream, std::uint64_t step, std::uint64_t first, int n,
                                 const SampleArrays& out) const {
  const int T = rules_.seq_length;
  const std::size_t W = static_cast<std::size_t>(T) + 1;
  const std::uint64_t key = rng::key_of(seed, stream), offset = DataBlend::stream_offset(seed, stream);
  std::vector<int> window(W);
  std::vector<std::uint8_t> mask(W, 1);
  std::uint64_t counted = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t sample = first + static_cast<std::uint64_t>(i);
    const std::size_t s = blend_.choose_at(offset, step, sample);
    const TokenSource& source = blend_.source(s);
    if (rules_.pack) {
      const PackedDocuments& bins = *packed_[s];
      if (sample >> 32 != 0) fatal("SampleReader: sample index beyond 2^32");
      bins.read(rng::hash(key, (step << 32) + sample) % bins.num_bins(), window.data(), mask.data());
    } else {
      const std::uint64_t start = sample_start(seed, stream, step, sample, source.size(), T);
      source.read(start, static_cast<int>(W), window.data());
      if (masked_) source.read_loss_mask(start, static_cast<int>(W), mask.data());
    }
    const std::size_t row = static_cast<std::size_t>(i) * static_cast<std::size_t>(T);
    if (out.inputs) std::copy(window.begin(), window.begin() + T, out.inputs + row);
    if (out.targets) std::copy(window.begin() + 1, window.end(), out.targets + row);
    int doc = 0;
    for (int t = 0; t < T; ++t) {
      const bool after_eod = t > 0 && rules_.eod && window[static_cast<std::size_t>(t) - 1] == *rules_.eod;
      if (after_eod) doc = t;
      if (out.doc_start) out.doc_start[row + static_cast<std::size_t>(t)] = doc;
      if (out.positions) out.positions[row + static_cast<std::size_t>(t)] = t - doc;
      bool counts = !masked_ || mask[static_cast<std::size_t>(t) + 1] != 0;  // the target's own mask byte
      if (rules_.eod_mask_loss && window[static_cast<std::size_t>(t)] == *rules_.eod) counts = false;
      if (out.loss_mask) out.loss_mask[row + static_cast<std::size_t>(t)] = counts ? 1.0f : 0.0f;
      counted += counts;
    }
  }
  return counted;
}

}  // namespace dtrain
