// A micro-batch as the model sees it: the caller's token ids and next-token targets, passed to the
// forward and the backward of every chunk, and where its loss goes. The model never stores them.
#pragma once

namespace dtrain {

struct MicroBatch {
  const int* tokens;   // (B,T) input token ids
  const int* targets;  // (B,T) the token that follows each input
  // (1) device memory: the forward through the head adds the micro-batch's summed token loss here,
  // without the host waiting for it; null where nobody reads the loss.
  double* loss_sum = nullptr;
};

}  // namespace dtrain
