// A micro-batch as the model sees it: the caller's token ids and next-token targets, passed to the
// forward and the backward of every chunk, where its loss goes, and, for documents packed in a sample
// or fine-tuning data, which targets count and where each document starts. The model never stores them.
// Every array is (B,T) in the device's memory, rows as the rank holds them (under context parallelism
// its two chunks of each sample; positions and document starts are positions in the whole sample).
#pragma once

namespace dtrain {

struct MicroBatch {
  const int* tokens;   // (B,T) input token ids
  const int* targets;  // (B,T) the token that follows each input
  // (1) device memory: the forward through the head adds the micro-batch's summed token loss here,
  // without the host waiting for it; null where nobody reads the loss.
  double* loss_sum = nullptr;
  // (B,T) 1 where the target counts in the loss, 0 where it does not (a prompt, padding, a document's
  // end-of-document token with data.eod_mask_loss); null: every target counts.
  const float* loss_mask = nullptr;
  // (B,T) the sample position where each token's document starts (data.reset_attention_mask): attention
  // stays inside documents; null: one document per sample.
  const int* doc_start = nullptr;
  // (B,T) each token's position id (data.reset_position_ids: counted from its document's start); null:
  // its position in the sample.
  const int* positions = nullptr;
};

}  // namespace dtrain
