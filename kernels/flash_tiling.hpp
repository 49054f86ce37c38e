// The tiling of the CUDA backend's fused attention (kernels/cuda/attention_16bit.cu, attention_fp32.cu),
// as plain functions that compile for the host too, so that the index math is tested without a GPU
// (tests/unit/test_flash_tiling.cpp). Tiles of kTile keys and of kTile query rows (kWideRows in the
// 16-bit forward); four warps per thread block, each owning 16 rows of a tile (32 in the 16-bit
// forward); the head dim padded to the next of 16/32/64/128 (the tensor-core fragments are 16 wide;
// padded columns are loaded as zeros and never stored).
#pragma once
#include <cstddef>

#include "kernels/attention_visibility.hpp"
#include "kernels/host_device.hpp"

namespace dtrain::kernels::flash {

constexpr int kTile = 64;        // query rows and keys per tile
constexpr int kWarps = 4;        // warps per thread block
constexpr int kWarpRows = 16;    // rows of a tile each warp owns (kTile / kWarps)
constexpr int kMaxHeadDim = 128;
// Query rows of a block of the 16-bit forward kernel: each warp owns two 16-row tensor-core tiles (32
// rows), so that every K and V fragment it reads from shared memory feeds two products instead of one.
constexpr int kWideRows = 2 * kTile;

// The padded head dim the kernels are instantiated for, or 0 when HD is above kMaxHeadDim.
DTRAIN_HOST_DEVICE constexpr int padded_head_dim(int HD) {
  return HD <= 16 ? 16 : HD <= 32 ? 32 : HD <= 64 ? 64 : HD <= kMaxHeadDim ? 128 : 0;
}
// Tiles of `rows` rows (kTile: key tiles, and query tiles outside the 16-bit forward) over T rows.
DTRAIN_HOST_DEVICE constexpr int tiles(int T, int rows = kTile) { return (T + rows - 1) / rows; }
// Causal: query tile i of `rows` rows sees the key tiles up to the one holding its last row (with
// rows = kTile, tiles 0..i).
DTRAIN_HOST_DEVICE constexpr int key_tiles_seen(int query_tile, int T, int rows = kTile) {
  return ((query_tile + 1) * rows - 1) / kTile + 1 < tiles(T) ? ((query_tile + 1) * rows - 1) / kTile + 1 : tiles(T);
}
// Key tile j is seen by query tiles j..tiles(T)-1.
DTRAIN_HOST_DEVICE constexpr int first_query_tile(int key_tile) { return key_tile; }
// Whether query row q (global) attends to key k (global) of a sequence of T rows.
DTRAIN_HOST_DEVICE constexpr bool visible(int q, int k, int T) { return k <= q && k < T && q < T; }
// Whether every row of query tile qt (of `rows` rows) is a real row (below T) that sees every key of key
// tile kt: then the kernels skip the causal mask for the pair (a key tile wholly below the diagonal of a
// full query tile); the diagonal's and the last, ragged query tile's pairs keep it.
DTRAIN_HOST_DEVICE constexpr bool unmasked_tile_pair(int qt, int kt, int T, int rows = kTile) {
  return (kt + 1) * kTile <= qt * rows && (qt + 1) * rows <= T;
}
// Whether any of query rows [first_row, first_row + n) sees a key of key tile kt (a warp whose rows see
// none of a diagonal key tile skips its products: they would add nothing).
DTRAIN_HOST_DEVICE constexpr bool rows_see_key_tile(int first_row, int n, int kt) { return kt * kTile <= first_row + n - 1; }

// ---- what each query row sees (kernels/attention_visibility.hpp): row q sees keys first_key(q) <= k <= q,
// first_key non-decreasing along q (documents packed in a sample, a sliding window). The kernels take the
// sample's KeyVisibility (nothing limits the rows: plain causal attention).
// Whether query row q, whose first visible key is `first`, sees key k.
DTRAIN_HOST_DEVICE constexpr bool visible_from(int q, int k, int T, int first) { return visible(q, k, T) && k >= first; }
// Row q's first visible key (q clamped to the sample's last row, for the padding rows of a ragged tile).
DTRAIN_HOST_DEVICE inline int first_key_of_row(KeyVisibility v, int q, int T) {
  const int r = q < T ? q : T - 1;
  return v.first_key(r, r);
}
// The first key tile a query tile needs, from its first row's first key (every later row's is there or
// later): the key tiles wholly before it are skipped.
DTRAIN_HOST_DEVICE inline int first_key_tile(KeyVisibility v, int first_row) { return v.first_key(first_row, first_row) / kTile; }
// Whether a tile pair needs no mask at all: unmasked_tile_pair's causal condition, and every row of the
// query tile (the last real one, whose first key is the latest) sees the whole key tile.
DTRAIN_HOST_DEVICE inline bool unmasked_visible_pair(int qt, int kt, int T, KeyVisibility v, int rows = kTile) {
  return unmasked_tile_pair(qt, kt, T, rows) && (!v.limits() || first_key_of_row(v, (qt + 1) * rows - 1, T) <= kt * kTile);
}
// The query tiles that see key tile kt: [kt, end), end the first tile whose first row's first key is
// after the key tile's last key (tiles(T) when nothing limits the rows).
DTRAIN_HOST_DEVICE inline int query_tiles_end(int kt, int T, KeyVisibility v) {
  if (!v.limits()) return tiles(T);
  int end = kt;
  while (end < tiles(T) && v.first_key(end * kTile, end * kTile) <= kt * kTile + kTile - 1) ++end;
  return end;
}

// Shared memory of each kernel, bytes, for padded head dim D.
// bf16 and fp16 (tensor cores, kernels/cuda/attention_16bit.cu): 16-bit element tiles of kTile rows
// whose rows are padded by 8 elements (16 bytes) to mma_row_stride(D), so that the 8 row addresses of
// one ldmatrix start in 8 different groups of 4 banks (a row is D/2 + 4 words: rows i and i+1 are 4
// banks apart modulo 32 for D = 64 and 128, and 12 or 20 banks apart, still 8 distinct groups, for
// D = 16 and 32). The walked tiles are double-buffered (the next one loads while the current one is used);
// scores, probabilities and every accumulator stay in registers.
DTRAIN_HOST_DEVICE constexpr int mma_row_stride(int D) { return D + 8; }
DTRAIN_HOST_DEVICE constexpr std::size_t mma_tile_bytes(int D) { return static_cast<std::size_t>(kTile) * mma_row_stride(D) * 2; }
// Q (kWideRows rows), 2 x (K, V).
DTRAIN_HOST_DEVICE constexpr std::size_t mma_forward_smem(int D) { return (kWideRows / kTile + 4) * mma_tile_bytes(D); }
// Q, dO, 2 x (K, V).
DTRAIN_HOST_DEVICE constexpr std::size_t mma_dq_smem(int D) { return 6 * mma_tile_bytes(D); }
// K, V, 2 x (Q, dO), 2 x (lse, Dsum, document starts) of the query tile (fp32, int).
DTRAIN_HOST_DEVICE constexpr std::size_t mma_dkv_smem(int D) { return 6 * mma_tile_bytes(D) + 2 * 3 * kTile * 4; }
// fp32 (FMAs, kernels/cuda/attention_fp32.cu, for exactness rather than speed): single buffers (two would
// not fit at head dim 128), the scores and the accumulators in shared memory; the probabilities and score
// gradients are written in place over the scores.
DTRAIN_HOST_DEVICE constexpr std::size_t fma_tile_bytes(int D) { return static_cast<std::size_t>(kTile) * D * 4; }
DTRAIN_HOST_DEVICE constexpr std::size_t fma_forward_smem(int D) {
  // Q, K, V, scores (kTile,kTile), output accumulator (rescaled row by row), m and l.
  return 3 * fma_tile_bytes(D) + kTile * kTile * 4 + fma_tile_bytes(D) + 2 * kTile * 4;
}
DTRAIN_HOST_DEVICE constexpr std::size_t fma_dkv_smem(int D) {
  // K, V, Q, dO, P and dP (kTile,kTile), lse, Dsum and document starts, dK and dV.
  return 4 * fma_tile_bytes(D) + 2 * kTile * kTile * 4 + 3 * kTile * 4 + 2 * fma_tile_bytes(D);
}
DTRAIN_HOST_DEVICE constexpr std::size_t fma_dq_smem(int D) {
  // Q, dO, K, V, P and dP (kTile,kTile), lse and Dsum, dQ, document starts.
  return 4 * fma_tile_bytes(D) + 2 * kTile * kTile * 4 + 3 * kTile * 4 + fma_tile_bytes(D);
}
// The most dynamic shared memory a block may have on sm_80 and sm_90 (227 KiB on Hopper, 163 KiB on
// the A100); each kernel asks for its own size and the launch checks it against the device's limit.
constexpr std::size_t kHopperSmem = 227 * 1024;

}  // namespace dtrain::kernels::flash
