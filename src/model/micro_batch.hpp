// A micro-batch as the model sees it: the caller's token ids and next-token targets, passed to the
// forward and the backward of every chunk. The model never stores them.
#pragma once

namespace dtrain {

struct MicroBatch {
  const int* tokens;   // (B,T) input token ids
  const int* targets;  // (B,T) the token that follows each input
};

}  // namespace dtrain
