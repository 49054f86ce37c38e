// Context parallelism's split of the data: a rank of the cp group holds chunks cp_rank and
// 2cp-1-cp_rank of every sample's 2cp chunks (the zig-zag split; ActivationDims::zigzag_chunk), as its
// rows [0, T/2) and [T/2, T) of that sample. Its ring attention is model/ring_attention.*; its
// gradients are reduced over dp x cp (parallel/grad_sync.*).
#pragma once
#include <cstdint>

#include "plan/activation_layout.hpp"

namespace dtrain {

// From `samples` whole samples of `seq` values each (whole: (samples, seq); token ids, targets, loss
// masks, document starts or positions, all 4 bytes), the rank's two chunks of each into its rows
// (mine: (samples, d.T), d.T = seq / cp). Values are copied as they are: positions and document starts
// stay positions in the whole sample.
void keep_own_chunks(const ActivationDims& d, int samples, int seq, const std::uint32_t* whole, std::uint32_t* mine);

}  // namespace dtrain
