// The tiling of the CUDA backend's fused attention (kernels/flash_tiling.hpp), checked on the host: the
// tiles the forward, dK/dV and dQ kernels visit cover every causal (query, key) pair exactly once, the
// tile pairs they leave unmasked hold only visible pairs, and every kernel's shared memory fits a
// Hopper block; with documents packed in the sequence and with a sliding window, the walks the kernels
// take (first_key_tile, query_tiles_end, the 16-bit forward's warp skips) cover every pair a row sees
// exactly once, and the block kernels' key ranges are those pairs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>
#include <vector>

#include "kernels/attention_visibility.hpp"
#include "kernels/flash_tiling.hpp"

using namespace dtrain::kernels::flash;

TEST_CASE("flash tiling: padded head dims and tile counts") {
  CHECK(padded_head_dim(1) == 16);
  CHECK(padded_head_dim(16) == 16);
  CHECK(padded_head_dim(17) == 32);
  CHECK(padded_head_dim(40) == 64);
  CHECK(padded_head_dim(64) == 64);
  CHECK(padded_head_dim(65) == 128);
  CHECK(padded_head_dim(128) == 128);
  CHECK(padded_head_dim(129) == 0);
  CHECK(tiles(1) == 1);
  CHECK(tiles(64) == 1);
  CHECK(tiles(65) == 2);
  CHECK(tiles(1024) == 16);
  CHECK(tiles(1024, kWideRows) == 8);
  CHECK(tiles(1000, kWideRows) == 8);
  CHECK(tiles(129, kWideRows) == 2);
  // A 128-row query tile i sees key tiles 0..2i+1 (cut at the sequence's last).
  CHECK(key_tiles_seen(0, 1024, kWideRows) == 2);
  CHECK(key_tiles_seen(7, 1024, kWideRows) == 16);
  CHECK(key_tiles_seen(1, 130, kWideRows) == 3);
  CHECK(key_tiles_seen(0, 64, kWideRows) == 1);
  // The warps of the first wide tile: rows 0-31 and 32-63 see nothing of key tile 1 (keys 64-127), rows
  // 64-95 do.
  CHECK(!rows_see_key_tile(0, 32, 1));
  CHECK(!rows_see_key_tile(32, 32, 1));
  CHECK(rows_see_key_tile(64, 32, 1));
  CHECK(rows_see_key_tile(32, 32, 0));
}

TEST_CASE("flash tiling: each kernel's tiles cover every causal pair exactly once") {
  for (int T : {1, 2, 63, 64, 65, 127, 128, 129, 130, 200, 257}) {
    INFO("T=" << T);
    // How often each (query, key) pair falls in a visited tile pair, over the pairs it sees: by query
    // tiles of `rows` rows (the forward: kWideRows; dQ: kTile), each warp of the 16-bit forward (32 rows)
    // skipping the key tiles its rows do not see, or by key tiles (dK/dV).
    auto coverage = [&](bool by_query_tile, int rows) {
      std::vector<int> seen(static_cast<std::size_t>(T) * T, 0);
      for (int a = 0; a < (by_query_tile ? tiles(T, rows) : tiles(T)); ++a) {
        const int begin = by_query_tile ? 0 : first_query_tile(a), end = by_query_tile ? key_tiles_seen(a, T, rows) : tiles(T);
        for (int b = begin; b < end; ++b) {
          const int qt = by_query_tile ? a : b, kt = by_query_tile ? b : a;
          for (int q = qt * rows; q < (qt + 1) * rows; ++q) {
            const int warp_first = qt * rows + (q - qt * rows) / (rows / kWarps) * (rows / kWarps);
            if (by_query_tile && rows == kWideRows && !rows_see_key_tile(warp_first, rows / kWarps, kt)) continue;
            for (int k = kt * kTile; k < (kt + 1) * kTile; ++k)
              if (visible(q, k, T)) ++seen[static_cast<std::size_t>(q) * T + k];
          }
        }
      }
      return seen;
    };
    const std::vector<int> forward = coverage(true, kWideRows), dq = coverage(true, kTile), dkv = coverage(false, kTile);
    int wrong = 0;
    for (int q = 0; q < T; ++q)
      for (int k = 0; k < T; ++k) {
        const int want = k <= q ? 1 : 0;
        wrong += forward[static_cast<std::size_t>(q) * T + k] != want;
        wrong += dq[static_cast<std::size_t>(q) * T + k] != want;
        wrong += dkv[static_cast<std::size_t>(q) * T + k] != want;
      }
    CHECK(wrong == 0);
    // The forward's wide query tiles: an unmasked pair holds only visible pairs; below the diagonal, only
    // a ragged last query tile is masked.
    int wide_unmasked_but_hidden = 0, wide_masked_below = 0;
    for (int qt = 0; qt < tiles(T, kWideRows); ++qt)
      for (int kt = 0; kt < key_tiles_seen(qt, T, kWideRows); ++kt) {
        if (!unmasked_tile_pair(qt, kt, T, kWideRows)) {
          wide_masked_below += (kt + 1) * kTile <= qt * kWideRows;
          continue;
        }
        for (int q = qt * kWideRows; q < (qt + 1) * kWideRows; ++q)
          for (int k = kt * kTile; k < (kt + 1) * kTile; ++k) wide_unmasked_but_hidden += !visible(q, k, T);
      }
    CHECK(wide_unmasked_but_hidden == 0);
    CHECK(wide_masked_below == (T % kWideRows == 0 ? 0 : (tiles(T, kWideRows) - 1) * kWideRows / kTile));
    // A pair the kernels leave unmasked has every (query, key) visible, and only the diagonal and the
    // last query tile of a ragged sequence are masked.
    int unmasked_but_hidden = 0, masked = 0;
    for (int qt = 0; qt < tiles(T); ++qt)
      for (int kt = 0; kt <= qt; ++kt) {
        if (!unmasked_tile_pair(qt, kt, T)) {
          masked += kt < qt;
          continue;
        }
        for (int q = qt * kTile; q < (qt + 1) * kTile; ++q)
          for (int k = kt * kTile; k < (kt + 1) * kTile; ++k) unmasked_but_hidden += !visible(q, k, T);
      }
    CHECK(unmasked_but_hidden == 0);
    CHECK(masked == (T % kTile == 0 ? 0 : tiles(T) - 1));  // below the diagonal: the ragged last tile's
    CHECK(!visible(T, 0, T));  // rows past the sequence see nothing
    CHECK(!visible(0, T, T));
  }
}

namespace {

// Document starts of T rows cut into documents of the given lengths, the last running to T.
std::vector<int> document_starts(int T, const std::vector<int>& lengths) {
  std::vector<int> ds(static_cast<std::size_t>(T));
  int start = 0, next = 0;
  std::size_t d = 0;
  for (int t = 0; t < T; ++t) {
    if (t == next) start = t, next = d < lengths.size() ? t + lengths[d++] : T;
    ds[static_cast<std::size_t>(t)] = start;
  }
  return ds;
}

}  // namespace

TEST_CASE("flash tiling with packed documents and windows: the kernels' walks cover each row's pairs exactly once") {
  struct Case {
    int T;
    std::vector<int> lengths;
    int window;  // 0: none
  };
  for (const Case& c : {Case{200, {1, 1, 62, 64, 10}, 0}, Case{257, {130, 127}, 0}, Case{130, {64, 64, 2}, 0}, Case{300, {3, 200, 1, 50}, 0},
                        Case{64, {}, 0}, Case{129, {128}, 0}, Case{300, {}, 70}, Case{300, {}, 1}, Case{257, {}, 64}, Case{200, {}, 129},
                        Case{300, {3, 200, 1, 50}, 90}}) {
    const int T = c.T;
    const std::vector<int> ds = document_starts(T, c.lengths);
    const dtrain::kernels::KeyVisibility d{ds.data(), c.window};
    INFO("T=" << T << ", " << c.lengths.size() << " boundaries, window " << c.window);
    // Row q sees key k: causal, in its document, and (with a window) fewer than `window` positions back.
    const auto sees = [&](int q, int k) {
      return k <= q && k >= ds[static_cast<std::size_t>(q)] && (c.window == 0 || q - k < c.window);
    };
    // The forward (kWideRows query tiles, warps of 32 rows skipping key tiles after their rows and
    // before their first row's document), dQ (kTile rows), dK/dV (key tiles to query_tiles_end).
    std::vector<int> forward(static_cast<std::size_t>(T) * T), dq(forward.size()), dkv(forward.size());
    for (int qt = 0; qt < tiles(T, kWideRows); ++qt)
      for (int kt = first_key_tile(d, qt * kWideRows); kt < key_tiles_seen(qt, T, kWideRows); ++kt)
        for (int q = qt * kWideRows; q < std::min(T, (qt + 1) * kWideRows); ++q) {
          const int warp_first = qt * kWideRows + (q - qt * kWideRows) / 32 * 32;
          if (!rows_see_key_tile(warp_first, 32, kt) || first_key_of_row(d, warp_first, T) > kt * kTile + kTile - 1)
            continue;
          for (int k = kt * kTile; k < std::min(T, (kt + 1) * kTile); ++k) forward[static_cast<std::size_t>(q) * T + k] += sees(q, k);
        }
    for (int qt = 0; qt < tiles(T); ++qt)
      for (int kt = first_key_tile(d, qt * kTile); kt < key_tiles_seen(qt, T); ++kt)
        for (int q = qt * kTile; q < std::min(T, (qt + 1) * kTile); ++q)
          for (int k = kt * kTile; k < std::min(T, (kt + 1) * kTile); ++k) dq[static_cast<std::size_t>(q) * T + k] += sees(q, k);
    for (int kt = 0; kt < tiles(T); ++kt)
      for (int qt = first_query_tile(kt); qt < query_tiles_end(kt, T, d); ++qt)
        for (int q = qt * kTile; q < std::min(T, (qt + 1) * kTile); ++q)
          for (int k = kt * kTile; k < std::min(T, (kt + 1) * kTile); ++k) dkv[static_cast<std::size_t>(q) * T + k] += sees(q, k);
    int wrong = 0, unmasked_but_hidden = 0;
    for (int q = 0; q < T; ++q)
      for (int k = 0; k < T; ++k) {
        const int want = sees(q, k) ? 1 : 0;
        const std::size_t at = static_cast<std::size_t>(q) * T + k;
        wrong += (forward[at] != want) + (dq[at] != want) + (dkv[at] != want);
      }
    CHECK(wrong == 0);
    for (const int rows : {kTile, kWideRows})
      for (int qt = 0; qt < tiles(T, rows); ++qt)
        for (int kt = 0; kt < tiles(T); ++kt)
          if (unmasked_visible_pair(qt, kt, T, d, rows))
            for (int q = qt * rows; q < (qt + 1) * rows; ++q)
              for (int k = kt * kTile; k < (kt + 1) * kTile; ++k) unmasked_but_hidden += q >= T || !sees(q, k);
    CHECK(unmasked_but_hidden == 0);
    // The block kernels (ring attention, the key/value cache): a block of keys at positions k_pos.. and
    // query rows at q_pos..: exactly the keys each row sees, clamped to the block.
    int block_wrong = 0;
    for (const auto& [q_pos, k_pos, Tk] : {std::tuple<int, int, int>{0, 0, T}, {T / 2, 0, T / 2}, {T / 2, T / 2, T - T / 2}, {T - 1, 0, T}})
      for (int i = 0; q_pos + i < T; ++i) {
        const auto r = dtrain::kernels::block_visible_keys(q_pos + i, d.first_key(q_pos + i, q_pos + i), k_pos, Tk);
        block_wrong += r.first < 0 || r.last > Tk || r.first > r.last;
        for (int j = 0; j < Tk; ++j) block_wrong += (j >= r.first && j < r.last) != sees(q_pos + i, k_pos + j);
      }
    CHECK(block_wrong == 0);
  }
  CHECK(query_tiles_end(2, 1000, dtrain::kernels::KeyVisibility{}) == tiles(1000));
  CHECK(first_key_tile(dtrain::kernels::KeyVisibility{}, 500) == 0);
  // A window skips the key tiles wholly before a query tile's first row's window: at T = 4096 and
  // W = 1024, query tile 40 (rows 2560..) starts at key tile (2560 - 1023) / 64 = 24, and key tile 0 is
  // seen by query tiles 0..16 (tile 17's first row, 1088, sees keys from 65 on).
  CHECK(first_key_tile(dtrain::kernels::KeyVisibility{nullptr, 1024}, 40 * kTile) == 24);
  CHECK(query_tiles_end(0, 4096, dtrain::kernels::KeyVisibility{nullptr, 1024}) == 17);
}

TEST_CASE("flash tiling: shared memory per block, by hand, fits a Hopper block for every head dim") {
  // bf16, head dim 64: rows padded to 72 elements (144 bytes), a tile 64 x 144 = 9216 bytes.
  CHECK(mma_row_stride(64) == 72);
  // Forward: Q (128 rows, two tiles' worth) + 2 x (K, V).
  CHECK(mma_forward_smem(64) == 6 * 9216);
  // dQ: Q, dO + 2 x (K, V).
  CHECK(mma_dq_smem(64) == 6 * 9216);
  // dK/dV at head dim 128 (rows of 136 elements, 17408 bytes a tile): K, V + 2 x (Q, dO), 2 x (lse, Dsum).
  CHECK(mma_dkv_smem(128) == 6 * 17408 + 1536);
  // fp32, head dim 64: Q, K, V 3 x 16384, scores 16384, output 16384, m and l 512.
  CHECK(fma_forward_smem(64) == 3 * 16384 + 16384 + 16384 + 512);
  // fp32 at head dim 128: K, V, Q, dO 4 x 32768, P and dP 2 x 16384, lse and Dsum 512, dK and dV 2 x 32768.
  CHECK(fma_dkv_smem(128) == 131072 + 32768 + 768 + 65536);
  // fp32 dQ at head dim 128: Q, dO, K, V 4 x 32768, P and dP 2 x 16384, lse and Dsum 512, dQ 32768.
  CHECK(fma_dq_smem(128) == 131072 + 32768 + 768 + 32768);
  for (int D : {16, 32, 64, 128}) {
    INFO("D=" << D);
    CHECK(mma_forward_smem(D) <= kHopperSmem);
    CHECK(mma_dkv_smem(D) <= kHopperSmem);
    CHECK(mma_dq_smem(D) <= kHopperSmem);
    CHECK(fma_forward_smem(D) <= kHopperSmem);
    CHECK(fma_dkv_smem(D) <= kHopperSmem);
    CHECK(fma_dq_smem(D) <= kHopperSmem);
    // The padded rows keep every ldmatrix row address 16-byte aligned (cp.async and ldmatrix need it)
    // and put the 8 rows of one ldmatrix in 8 distinct groups of 4 banks.
    CHECK(mma_row_stride(D) * 2 % 16 == 0);
    std::vector<int> groups;
    for (int row = 0; row < 8; ++row) groups.push_back((row * mma_row_stride(D) * 2 / 4) % 32 / 4);
    std::sort(groups.begin(), groups.end());
    CHECK(std::unique(groups.begin(), groups.end()) == groups.end());
  }
}
