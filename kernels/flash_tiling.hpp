// The tiling of the CUDA backend's fused attention (kernels/cuda/attention.cu), as plain functions that
// compile for the host too, so that the index math is tested without a GPU (tests/unit/
// test_flash_tiling.cpp). Square tiles of kFlashTile query rows by kFlashTile keys; four warps per
// thread block, each owning 16 rows of a tile; the head dim padded to the next of 16/32/64/128 (the
// tensor-core fragments are 16 wide; padded columns are loaded as zeros and never stored).
#pragma once
#include <cstddef>

#ifdef __CUDACC__
#define DTRAIN_HOST_DEVICE __host__ __device__
#else
#define DTRAIN_HOST_DEVICE
#endif

namespace dtrain::kernels::flash {

constexpr int kTile = 64;        // query rows and keys per tile
constexpr int kWarps = 4;        // warps per thread block
constexpr int kWarpRows = 16;    // rows of a tile each warp owns (kTile / kWarps)
constexpr int kMaxHeadDim = 128;

// The padded head dim the kernels are instantiated for, or 0 when HD is above kMaxHeadDim.
DTRAIN_HOST_DEVICE constexpr int padded_head_dim(int HD) {
  return HD <= 16 ? 16 : HD <= 32 ? 32 : HD <= 64 ? 64 : HD <= kMaxHeadDim ? 128 : 0;
}
DTRAIN_HOST_DEVICE constexpr int tiles(int T) { return (T + kTile - 1) / kTile; }
// Causal: query tile i sees key tiles 0..i (the tiles are square, so tile i's last key is its last row).
DTRAIN_HOST_DEVICE constexpr int key_tiles_seen(int query_tile, int T) {
  return query_tile + 1 < tiles(T) ? query_tile + 1 : tiles(T);
}
// Key tile j is seen by query tiles j..tiles(T)-1.
DTRAIN_HOST_DEVICE constexpr int first_query_tile(int key_tile) { return key_tile; }
// Whether query row q (global) attends to key k (global) of a sequence of T rows.
DTRAIN_HOST_DEVICE constexpr bool visible(int q, int k, int T) { return k <= q && k < T && q < T; }

// Shared memory of each kernel, bytes, for padded head dim D and element size `elem` (2: bf16, 4: fp32).
// Tiles of elements are (kTile, D); fp32 tiles are (kTile, kTile) scores or (kTile, D) accumulators.
// The element copies of probabilities and score gradients that the products read are separate tiles
// in bf16 and the fp32 tiles themselves in fp32 (written in place).
DTRAIN_HOST_DEVICE constexpr std::size_t score_copy(int elem) { return elem == 4 ? 0 : static_cast<std::size_t>(kTile * kTile * elem); }
DTRAIN_HOST_DEVICE constexpr std::size_t forward_smem(int D, int elem) {
  // Q, K, V (elements), scores (fp32), probabilities (elements), output accumulator (fp32), m and l.
  return static_cast<std::size_t>(3 * kTile * D * elem + kTile * kTile * 4 + kTile * D * 4 + 2 * kTile * 4) + score_copy(elem);
}
DTRAIN_HOST_DEVICE constexpr std::size_t dkv_smem(int D, int elem) {
  // K, V, Q, dO (elements), P and dP (fp32), P and dS (elements), dK and dV (fp32), lse and D.
  return static_cast<std::size_t>(4 * kTile * D * elem + 2 * kTile * kTile * 4 + 2 * kTile * D * 4 + 2 * kTile * 4) + 2 * score_copy(elem);
}
DTRAIN_HOST_DEVICE constexpr std::size_t dq_smem(int D, int elem) {
  // Q, dO, K, V (elements), P and dP (fp32), dS (elements), dQ (fp32), lse and D.
  return static_cast<std::size_t>(4 * kTile * D * elem + 2 * kTile * kTile * 4 + kTile * D * 4 + 2 * kTile * 4) + score_copy(elem);
}
// The most dynamic shared memory a block may have on sm_80 and sm_90 (227 KiB on Hopper, 163 KiB on
// the A100); each kernel asks for its own size and the launch checks it against the device's limit.
constexpr std::size_t kHopperSmem = 227 * 1024;

}  // namespace dtrain::kernels::flash
