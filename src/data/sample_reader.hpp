// SampleReader: global sample j of step s of a data stream, as the model takes it: its inputs and
// targets and, when the run needs them, what packed documents and fine-tuning data add (Megatron's
// get_ltor_masks_and_position_ids, by the end-of-document token):
//   loss mask     1 where the target counts: the data's loss mask (dtrain-data --sft), times 0 where
//                 the input is the end-of-document token (data.eod_mask_loss) or the target padding
//                 (data.pack)
//   doc start     where each token's document starts in the sample: after every end-of-document input
//                 (data.reset_attention_mask: attention stays inside documents)
//   positions     each token's position counted from its document's start (data.reset_position_ids)
// Samples are windows of a source (batch_sampler.hpp's choice), or with data.pack bins of whole
// documents (document_packing.hpp) drawn the same way. A pure function of (seed, stream, step,
// sample): every layout and every resume reads the same samples.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/data_blend.hpp"
#include "data/document_packing.hpp"

namespace dtrain {

struct SampleRules {
  int seq_length = 0;
  std::optional<int> eod;  // the tokenizer's end-of-document token: documents end after it
  bool reset_position_ids = false, reset_attention_mask = false, eod_mask_loss = false, pack = false;
};

// Arrays of num_samples x seq_length for fill(); a null array is not wanted.
struct SampleArrays {
  int* inputs = nullptr;
  int* targets = nullptr;
  float* loss_mask = nullptr;
  int* doc_start = nullptr;
  int* positions = nullptr;
};

class SampleReader {
 public:
  // UserError when a rule needs the end-of-document token and there is none. Packing scans every source.
  SampleReader(const DataBlend& blend, const SampleRules& rules);

  // Whether fill() writes each array: a loss mask when some source has one, eod_mask_loss or pack.
  bool has_loss_mask() const { return masked_; }
  bool has_doc_start() const { return rules_.reset_attention_mask; }
  bool has_positions() const { return rules_.reset_position_ids; }
  // One line for the start-up log: what the samples carry ("" for plain windows).
  std::string describe() const;

  // Global samples [first, first + n) of `step`; returns the number of targets that count (the loss
  // mask's sum; n x seq_length without one).
  std::uint64_t fill(std::uint64_t seed, const std::string& stream, std::uint64_t step, std::uint64_t first, int n,
                     const SampleArrays& out) const;

 private:
  const DataBlend& blend_;
  SampleRules rules_;
  bool masked_ = false;
  std::vector<std::unique_ptr<PackedDocuments>> packed_;  // per source, with pack
};

}  // namespace dtrain
