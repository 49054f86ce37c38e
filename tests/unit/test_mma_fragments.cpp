// The lane maps of the bf16 attention kernels (kernels/mma_fragments.hpp), checked on the host against
// the PTX ISA's own tables: ldmatrix (.x4, plain and .trans) and mma.sync.m16n8k16 are emulated here
// lane by lane exactly as the ISA describes them, fed through the lane maps the kernels use, and the
// products compared with plain matrix products. Values are small integers, so every product is exact.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include "kernels/mma_fragments.hpp"

using namespace dtrain::kernels::mma;

namespace {

using Pair = std::array<float, 2>;     // one 32-bit register: two 16-bit values, lower first
using Regs4 = std::array<Pair, 4>;     // ldmatrix .x4 result, or an A fragment
using Lanes = std::array<Regs4, 32>;

// A row-major tile of `cols` columns.
struct Tile {
  int rows, cols;
  std::vector<float> v;
  float at(int r, int c) const { return v[static_cast<std::size_t>(r) * cols + c]; }
};
Tile numbered(int rows, int cols, int seed) {
  Tile t{rows, cols, std::vector<float>(static_cast<std::size_t>(rows) * cols)};
  for (std::size_t i = 0; i < t.v.size(); ++i) t.v[i] = static_cast<float>(static_cast<int>((i * 7 + seed * 13) % 11) - 5);
  return t;
}

// PTX ISA, ldmatrix: lane 8i + j gives the address of row j of matrix i (here a (row, column) of the
// tile, 8 consecutive elements from there); each lane receives, from matrix i, the elements of row
// lane / 4 at columns 2 (lane % 4), +1, or with .trans the elements of column lane / 4 at rows 2 (lane % 4), +1.
Lanes ldmatrix_x4(const Tile& t, const std::array<std::array<int, 2>, 32>& addr, bool trans) {
  Lanes out{};
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      for (int h = 0; h < 2; ++h) {
        const int mrow = trans ? 2 * (lane % 4) + h : lane / 4, mcol = trans ? lane / 4 : 2 * (lane % 4) + h;
        const auto& a = addr[8 * i + mrow];
        out[lane][i][h] = t.at(a[0], a[1] + mcol);
      }
  return out;
}

// PTX ISA, mma.m16n8k16 with .bf16 operands: groupID = lane >> 2, threadID_in_group = lane % 4;
// A elements a0..a7 (registers {a0,a1} {a2,a3} {a4,a5} {a6,a7}): row groupID for a0,a1,a4,a5 and
// groupID + 8 otherwise, column threadID_in_group * 2 + (i & 1), + 8 for a4..a7; B elements b0..b3
// (registers {b0,b1} {b2,b3}): row threadID_in_group * 2 + (i & 1), + 8 for b2,b3, column groupID;
// C elements c0..c3: row groupID for c0,c1 and groupID + 8 for c2,c3, column threadID_in_group * 2 + (i & 1).
using CFrag = std::array<std::array<float, 4>, 32>;
void mma_16816(CFrag& c, const Lanes& a, const std::array<std::array<Pair, 2>, 32>& b) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i == 0 || i == 1 || i == 4 || i == 5) ? g : g + 8, col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = a[lane][i / 2][i % 2];
    }
    for (int i = 0; i < 4; ++i) B[t * 2 + (i & 1) + (i >= 2 ? 8 : 0)][g] = b[lane][i / 2][i % 2];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? g : g + 8, col = t * 2 + (i & 1);
      for (int k = 0; k < 16; ++k) c[lane][i] += A[row][k] * B[k][col];
    }
  }
}

std::array<std::array<int, 2>, 32> addresses(int r0, int c0, int (*row)(int), int (*col)(int)) {
  std::array<std::array<int, 2>, 32> a{};
  for (int lane = 0; lane < 32; ++lane) a[lane] = {r0 + row(lane), c0 + col(lane)};
  return a;
}

}  // namespace

TEST_CASE("mma fragments: S = Q K^T then O = S V through the kernels' lane maps equal plain products") {
  // Q (16 x 32): one warp's rows, head dim 32; K (16 keys x 32), stored keys x head dim; V (16 keys x
  // 16 head dims), stored keys x head dim. S = Q K^T is 16 x 16 (two 8-key C tiles); O = S V is 16 x 16.
  const Tile Q = numbered(16, 32, 1), K = numbered(16, 32, 2), V = numbered(16, 16, 3);
  CFrag S0{}, S1{};  // key columns 0-7 and 8-15
  for (int k0 = 0; k0 < 32; k0 += 16) {
    const Lanes qa = ldmatrix_x4(Q, addresses(0, k0, ldm_row_a, ldm_col_a), false);
    const Lanes kb = ldmatrix_x4(K, addresses(0, k0, ldm_row_bt, ldm_col_bt), false);
    std::array<std::array<Pair, 2>, 32> b0{}, b1{};
    for (int lane = 0; lane < 32; ++lane) b0[lane] = {kb[lane][0], kb[lane][1]}, b1[lane] = {kb[lane][2], kb[lane][3]};
    mma_16816(S0, qa, b0);
    mma_16816(S1, qa, b1);
  }
  int wrong = 0;
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) {
      const int r = c_row(lane, e);
      float want0 = 0, want1 = 0;
      for (int d = 0; d < 32; ++d) want0 += Q.at(r, d) * K.at(c_col(lane, e), d), want1 += Q.at(r, d) * K.at(8 + c_col(lane, e), d);
      wrong += S0[lane][e] != want0;
      wrong += S1[lane][e] != want1;
    }
  CHECK(wrong == 0);

  // The A fragment of S (16 x 16 keys) from the two C tiles, then O = S V with V loaded .trans.
  Lanes sa{};
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r) {
      const CFrag& tile = a_from_c_tile(r) == 0 ? S0 : S1;
      sa[lane][r] = {tile[lane][a_from_c_value(r)], tile[lane][a_from_c_value(r) + 1]};
    }
  const Lanes vb = ldmatrix_x4(V, addresses(0, 0, ldm_row_a, ldm_col_a), true);
  std::array<std::array<Pair, 2>, 32> b0{}, b1{};
  for (int lane = 0; lane < 32; ++lane) b0[lane] = {vb[lane][0], vb[lane][1]}, b1[lane] = {vb[lane][2], vb[lane][3]};
  CFrag O0{}, O1{};  // head-dim columns 0-7 and 8-15
  mma_16816(O0, sa, b0);
  mma_16816(O1, sa, b1);
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) {
      const int r = c_row(lane, e);
      float want0 = 0, want1 = 0;
      for (int k = 0; k < 16; ++k) {
        float s = 0;
        for (int d = 0; d < 32; ++d) s += Q.at(r, d) * K.at(k, d);
        want0 += s * V.at(k, c_col(lane, e));
        want1 += s * V.at(k, 8 + c_col(lane, e));
      }
      wrong += O0[lane][e] != want0;
      wrong += O1[lane][e] != want1;
    }
  CHECK(wrong == 0);
}
