// The tiling of the CUDA backend's fused attention (kernels/flash_tiling.hpp), checked on the host: the
// tiles the forward, dK/dV and dQ kernels visit cover every causal (query, key) pair exactly once, and
// every kernel's shared memory fits a Hopper block.
#include <catch2/catch.hpp>

#include <vector>

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
}

TEST_CASE("flash tiling: each kernel's tiles cover every causal pair exactly once") {
  for (int T : {1, 2, 63, 64, 65, 130, 200}) {
    INFO("T=" << T);
    // How often each (query, key) pair falls in a visited tile pair, over the pairs it sees.
    auto coverage = [&](bool by_query_tile) {
      std::vector<int> seen(static_cast<std::size_t>(T) * T, 0);
      for (int a = 0; a < tiles(T); ++a) {
        const int begin = by_query_tile ? 0 : first_query_tile(a), end = by_query_tile ? key_tiles_seen(a, T) : tiles(T);
        for (int b = begin; b < end; ++b) {
          const int qt = by_query_tile ? a : b, kt = by_query_tile ? b : a;
          for (int q = qt * kTile; q < (qt + 1) * kTile; ++q)
            for (int k = kt * kTile; k < (kt + 1) * kTile; ++k)
              if (visible(q, k, T)) ++seen[static_cast<std::size_t>(q) * T + k];
        }
      }
      return seen;
    };
    const std::vector<int> forward_and_dq = coverage(true), dkv = coverage(false);
    int wrong = 0;
    for (int q = 0; q < T; ++q)
      for (int k = 0; k < T; ++k) {
        const int want = k <= q ? 1 : 0;
        wrong += forward_and_dq[static_cast<std::size_t>(q) * T + k] != want;
        wrong += dkv[static_cast<std::size_t>(q) * T + k] != want;
      }
    CHECK(wrong == 0);
    CHECK(!visible(T, 0, T));  // rows past the sequence see nothing
    CHECK(!visible(0, T, T));
  }
}

TEST_CASE("flash tiling: shared memory per block, by hand, fits a Hopper block for every head dim") {
  // Head dim 64, bf16 (double-buffered K and V): Q 8192 + 2 x (K, V) 32768, scores 16384, output 16384,
  // m and l 512, probabilities (bf16) 8192.
  CHECK(forward_smem(64, 2) == 8192 + 32768 + 16384 + 16384 + 512 + 8192);
  // fp32: single buffers, and the probabilities go into the scores' tile: no copy.
  CHECK(forward_smem(64, 4) == 3 * 64 * 64 * 4 + 16384 + 16384 + 512);
  // dK/dV, head dim 128, bf16: K, V 32768, 2 x (Q, dO) 65536, P and dP 32768, 2 x (lse, Dsum) 1024,
  // P and dS copies 16384 (dK and dV accumulate in registers).
  CHECK(dkv_smem(128, 2) == 32768 + 65536 + 32768 + 1024 + 16384);
  // dQ, head dim 64, bf16: Q, dO 16384, 2 x (K, V) 32768, P and dP 32768, lse and Dsum 512, dS 8192.
  CHECK(dq_smem(64, 2) == 16384 + 32768 + 32768 + 512 + 8192);
  // fp32 at head dim 128: K, V, Q, dO 4 x 32768, P and dP 2 x 16384, dK and dV 2 x 32768, lse and D 512.
  CHECK(dkv_smem(128, 4) == 131072 + 32768 + 65536 + 512);
  for (int D : {16, 32, 64, 128})
    for (int elem : {2, 4}) {
      INFO("D=" << D << " element bytes " << elem);
      CHECK(forward_smem(D, elem) <= kHopperSmem);
      CHECK(dkv_smem(D, elem) <= kHopperSmem);
      CHECK(dq_smem(D, elem) <= kHopperSmem);
    }
}
