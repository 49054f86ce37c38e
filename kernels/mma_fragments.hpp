// Where each lane's values sit in the tensor-core fragments the bf16 and fp16 attention kernels use
// (kernels/cuda/attention_16bit.cu): mma.sync.m16n8k16 (bf16 or fp16 in, the same fragment layouts for
// both; fp32 accumulators) and the ldmatrix loads that fill its operands from shared memory. Plain
// functions that compile for the host too, so that tests/unit/test_mma_fragments.cpp checks them
// against the PTX ISA's fragment tables by emulating the instructions on the host: a wrong lane map
// fails there, not on a GPU.
//
// Fragments of one warp (lane = 0..31, group = lane / 4, quad lane = lane % 4):
//   A (16 x 16, row-major): 4 registers of 2 16-bit values; register r holds row group + 8 (r % 2),
//     columns 2 quad + 8 (r / 2) and the next one (lower column in the lower half).
//   B (16 x 8, k x n): 2 registers; register r holds k = 2 quad + 8 r and the next, n = group.
//   C (16 x 8 fp32): 4 values; value e holds row group + 8 (e / 2), column 2 quad + e % 2.
// The C fragments of two neighbouring 8-column tiles, rounded to 16 bits in pairs, are the A fragment of
// the 16 columns they cover: the softmax's probabilities feed the next product without leaving
// registers (a_from_c).
#pragma once

#include "kernels/host_device.hpp"

namespace dtrain::kernels::mma {

// C fragment: the row (0..15) and column (0..7) of value e (0..3) of a lane.
DTRAIN_HOST_DEVICE constexpr int c_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
DTRAIN_HOST_DEVICE constexpr int c_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }

// ldmatrix .x4 takes one shared-memory row address per lane (lanes 8i..8i+7: the 8 rows of matrix i) and
// gives each lane register i = matrix i's row lane / 4, columns 2 (lane % 4) and the next (.trans: the
// transposed matrix's). The row and column, within a 16 x 16 block of a row-major tile, each lane points at:
//  - A operand (rows x k) and the B operand of a tile stored k x n, loaded .trans: registers 0..3 =
//    (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15): the A
//    fragment in order, or the B fragments (registers 0, 1) of the n-columns 0-7 and (2, 3) of 8-15;
DTRAIN_HOST_DEVICE constexpr int ldm_row_a(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
DTRAIN_HOST_DEVICE constexpr int ldm_col_a(int lane) { return 8 * (lane / 16); }
//  - the B operand of a tile stored n x k (keys x head dim for Q K^T), not transposed: registers 0..3 =
//    (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): the B fragments of n-columns
//    0-7 (registers 0, 1) and 8-15 (2, 3).
DTRAIN_HOST_DEVICE constexpr int ldm_row_bt(int lane) { return lane % 8 + 8 * (lane / 16); }
DTRAIN_HOST_DEVICE constexpr int ldm_col_bt(int lane) { return 8 * ((lane / 8) % 2); }

// A fragment register r from the C fragments of 8-column tiles 2j (lo) and 2j+1 (hi): the pair of C
// values (first index) it packs.
DTRAIN_HOST_DEVICE constexpr int a_from_c_tile(int r) { return r / 2; }      // 0: tile 2j, 1: tile 2j+1
DTRAIN_HOST_DEVICE constexpr int a_from_c_value(int r) { return 2 * (r % 2); }  // values v, v+1 of that tile

}  // namespace dtrain::kernels::mma
