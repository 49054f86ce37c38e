// The two forms of the fp16 tensor-core product the attention kernels use (kernels/cuda/flash_tiles.cuh):
// one m16n8k16 instruction (sm_80+) and Turing's two m16n8k8 instructions, each run by one warp.
#pragma once
#include "common/fp16.hpp"

namespace dtrain::testing {

// c16 and c8 (16 x 8, row-major, fp32) = a (16 x 16, row-major) b (16 x 8, k x n, row-major): on the GPU,
// by mma_16816<fp16> and by mma_16816_as_k8. Host pointers; fatal on a CUDA error.
void fp16_mma_both_forms(const fp16* a, const fp16* b, float* c16, float* c8);

}  // namespace dtrain::testing
