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
// bf16 (tensor cores): the tiles a kernel walks through are double-buffered (the next one loads while the
// current one is used), the backward's dK, dV and dQ accumulate in registers and are staged for the
// store through the walked tiles' buffers, and the probabilities and score gradients the products read
// are bf16 copies. fp32 (FMAs, for exactness rather than speed): single buffers (two would not fit at
// head dim 128), accumulators in shared memory, the copies written in place over the fp32 tiles.
DTRAIN_HOST_DEVICE constexpr int stages(int elem) { return elem == 2 ? 2 : 1; }
DTRAIN_HOST_DEVICE constexpr std::size_t score_copy(int elem) { return elem == 4 ? 0 : static_cast<std::size_t>(kTile * kTile * elem); }
DTRAIN_HOST_DEVICE constexpr std::size_t tile_bytes(int D, int elem) { return static_cast<std::size_t>(kTile * D * elem); }
DTRAIN_HOST_DEVICE constexpr std::size_t shared_accumulators(int D, int elem, int n) { return elem == 4 ? n * tile_bytes(D, 4) : 0; }
DTRAIN_HOST_DEVICE constexpr std::size_t forward_smem(int D, int elem) {
  // Q, stages x (K, V) (elements), scores (fp32), output accumulator (fp32: rescaled row by row), m and l,
  // probabilities.
  return tile_bytes(D, elem) * (1 + 2 * stages(elem)) + kTile * kTile * 4 + tile_bytes(D, 4) + 2 * kTile * 4 + score_copy(elem);
}
DTRAIN_HOST_DEVICE constexpr std::size_t dkv_smem(int D, int elem) {
  // K, V, stages x (Q, dO) (elements), P and dP (fp32), stages x (lse, Dsum), P and dS, dK and dV.
  return tile_bytes(D, elem) * (2 + 2 * stages(elem)) + 2 * kTile * kTile * 4 + stages(elem) * 2 * kTile * 4 + 2 * score_copy(elem) +
         shared_accumulators(D, elem, 2);
}
DTRAIN_HOST_DEVICE constexpr std::size_t dq_smem(int D, int elem) {
  // Q, dO, stages x (K, V) (elements), P and dP (fp32), lse and Dsum, dS, dQ.
  return tile_bytes(D, elem) * (2 + 2 * stages(elem)) + 2 * kTile * kTile * 4 + 2 * kTile * 4 + score_copy(elem) +
         shared_accumulators(D, elem, 1);
}
// The most dynamic shared memory a block may have on sm_80 and sm_90 (227 KiB on Hopper, 163 KiB on
// the A100); each kernel asks for its own size and the launch checks it against the device's limit.
constexpr std::size_t kHopperSmem = 227 * 1024;

}  // namespace dtrain::kernels::flash
