// fp16_mma_both_forms: one warp loads its fragments by the PTX ISA's tables (kernels/mma_fragments.hpp
// describes them: A register r holds row group + 8 (r % 2), columns 2 quad + 8 (r / 2) and the next; B
// register r holds k = 2 quad + 8 r and the next, n = group; C value e row group + 8 (e / 2), column
// 2 quad + e % 2) and multiplies them both ways.
#include <cuda_fp16.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/mma_fragments.hpp"
#include "mma_forms.hpp"

namespace dtrain::testing {
namespace {

namespace frag = ::dtrain::kernels::mma;
namespace tiles = ::dtrain::kernels::cuda::flash_tiles;

__device__ std::uint32_t pair(const fp16* m, int stride, int row, int col, bool transposed) {
  const std::uint16_t lo = transposed ? m[col * stride + row].bits : m[row * stride + col].bits;
  const std::uint16_t hi = transposed ? m[(col + 1) * stride + row].bits : m[row * stride + col + 1].bits;
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

__global__ void both_forms(const fp16* a, const fp16* b, float* c16, float* c8) {
  const int lane = threadIdx.x, group = lane / 4, quad = lane % 4;
  std::uint32_t ra[4];
  for (int r = 0; r < 4; ++r) ra[r] = pair(a, 16, group + 8 * (r % 2), 2 * quad + 8 * (r / 2), false);
  // B (k x n, row-major): register r holds b[k][n], b[k+1][n] for k = 2 quad + 8 r, n = group.
  const std::uint32_t b0 = pair(b, 8, group, 2 * quad, true), b1 = pair(b, 8, group, 2 * quad + 8, true);
  float x[4] = {}, y[4] = {};
  tiles::mma_16816<::dtrain::fp16>(x, ra, b0, b1);
  tiles::mma_16816_as_k8(y, ra, b0, b1);
  for (int e = 0; e < 4; ++e) {
    const int at = frag::c_row(lane, e) * 8 + frag::c_col(lane, e);
    c16[at] = x[e];
    c8[at] = y[e];
  }
}

}  // namespace

void fp16_mma_both_forms(const fp16* a, const fp16* b, float* c16, float* c8) {
  fp16 *da = nullptr, *db = nullptr;
  float* dc = nullptr;
  CUDA_CHECK(cudaMalloc(&da, 256 * sizeof(fp16)));
  CUDA_CHECK(cudaMalloc(&db, 128 * sizeof(fp16)));
  CUDA_CHECK(cudaMalloc(&dc, 256 * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(da, a, 256 * sizeof(fp16), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b, 128 * sizeof(fp16), cudaMemcpyHostToDevice));
  both_forms<<<1, 32>>>(da, db, dc, dc + 128);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(c16, dc, 128 * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(c8, dc + 128, 128 * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(da), cudaFree(db), cudaFree(dc);
}

}  // namespace dtrain::testing
