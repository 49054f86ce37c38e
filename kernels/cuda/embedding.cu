// CUDA backend: token + position embedding. The backward is deterministic without atomics: a block
// owns 32 rows of dwte and walks the tokens in tiles of kTokenTile; one warp sorts a tile's tokens of
// those rows by row (stable: token order within a row), then each row's rows of dout are summed in
// token order and added once per tile. A fixed order, so repeated tokens accumulate the same way on
// every run, and the loads of a row's tokens are independent: a frequent token (skewed data, byte-level
// vocabularies) no longer makes one block add thousands of rows one dependent step at a time.
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kRowsPerBlock = 32;
constexpr int kTokenTile = 1024;

template <typename KT>
__global__ void embedding_forward_kernel(KT* out, const int* tokens, const KT* wte, const KT* wpe, int vocab_start, int T, int C,
                                         int V, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long r = i / C;
  const int c = static_cast<int>(i % C);
  const int row = tokens[r] - vocab_start;
  float v = row >= 0 && row < V ? ld(wte[static_cast<long>(row) * C + c]) : 0.0f;
  if (wpe) v += ld(wpe[(r % T) * C + c]);
  out[i] = st<KT>(v);
}

template <typename KT>
__global__ void embedding_backward_wte_kernel(float* dwte, const KT* dout, const int* tokens, int vocab_start, long rows, int C,
                                              int V) {
  static_assert(kRowsPerBlock == 32, "one lane per row of the block in the list building");
  __shared__ int tile[kTokenTile];   // each token's row relative to the block's first, or -1
  __shared__ int order[kTokenTile];  // the tile's tokens of the block's rows, grouped by row, in token order
  __shared__ int start[kRowsPerBlock + 1];
  __shared__ int fill[kRowsPerBlock];
  const unsigned full = 0xffffffffu;
  const int first = blockIdx.x * kRowsPerBlock, lane = threadIdx.x % 32;
  for (long t0 = 0; t0 < rows; t0 += kTokenTile) {
    const int len = static_cast<int>(rows - t0 < kTokenTile ? rows - t0 : kTokenTile);
    __syncthreads();  // the previous tile's lists are used up
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
      const int r = tokens[t0 + j] - vocab_start - first;
      tile[j] = r >= 0 && r < kRowsPerBlock && first + r < V ? r : -1;
    }
    if (threadIdx.x < kRowsPerBlock) fill[threadIdx.x] = 0;
    __syncthreads();
    if (threadIdx.x < 32) {  // one warp: a stable counting sort of the tile's tokens by row
      for (int j0 = 0; j0 < len; j0 += 32) {
        const int r = j0 + lane < len ? tile[j0 + lane] : -1;
        const unsigned peers = __match_any_sync(full, r);
        if (r >= 0 && lane == __ffs(peers) - 1) fill[r] += __popc(peers);
        __syncwarp();
      }
      const int count = fill[lane];
      int upto = count;  // inclusive scan over the lanes (rows)
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(full, upto, o);
        if (lane >= o) upto += v;
      }
      start[lane] = upto - count;
      if (lane == 31) start[kRowsPerBlock] = upto;
      __syncwarp();
      fill[lane] = 0;
      __syncwarp();
      for (int j0 = 0; j0 < len; j0 += 32) {
        const int r = j0 + lane < len ? tile[j0 + lane] : -1;
        const unsigned peers = __match_any_sync(full, r);
        if (r >= 0) order[start[r] + fill[r] + __popc(peers & ((1u << lane) - 1u))] = j0 + lane;
        __syncwarp();
        if (r >= 0 && lane == __ffs(peers) - 1) fill[r] += __popc(peers);
        __syncwarp();
      }
    }
    __syncthreads();
    // Each row's tokens of this tile summed in token order (independent loads), then added once.
    for (int r = 0; r < kRowsPerBlock; ++r) {
      const int b = start[r], e = start[r + 1];
      if (b == e) continue;
      float* g = dwte + static_cast<long>(first + r) * C;
      for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = 0.0f;
        for (int k = b; k < e; ++k) s += ld(dout[(t0 + order[k]) * C + c]);
        g[c] += s;
      }
    }
  }
}

template <typename KT>
__global__ void embedding_backward_wpe_kernel(float* dwpe, const KT* dout, int B, int T, int C) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long>(T) * C) return;
  float s = dwpe[i];
  for (int b = 0; b < B; ++b) s += ld(dout[static_cast<long>(b) * T * C + i]);
  dwpe[i] = s;
}

template <typename KT>
void embedding_fw(KT* out, const int* tokens, const KT* wte, const KT* wpe, int vocab_start, int B, int T, int C, int V) {
  const long n = static_cast<long>(B) * T * C;
  embedding_forward_kernel<<<blocks_for(n), kThreads>>>(out, tokens, wte, wpe, vocab_start, T, C, V, n);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void embedding_bw_wte(float* dwte, const KT* dout, const int* tokens, int vocab_start, long rows, int C, int V) {
  embedding_backward_wte_kernel<<<blocks_for(V, kRowsPerBlock), kThreads>>>(dwte, dout, tokens, vocab_start, rows, C, V);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void embedding_bw_wpe(float* dwpe, const KT* dout, int B, int T, int C) {
  embedding_backward_wpe_kernel<<<blocks_for(static_cast<long>(T) * C), kThreads>>>(dwpe, dout, B, T, C);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void embedding_bw(float* dwte, float* dwpe, const KT* dout, const int* tokens, int vocab_start, int B, int T, int C, int V) {
  embedding_bw_wte(dwte, dout, tokens, vocab_start, static_cast<long>(B) * T, C, V);
  if (dwpe) embedding_bw_wpe(dwpe, dout, B, T, C);
}

}  // namespace

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int vocab_start, int B, int T, int C, int V) {
  embedding_fw(out, tokens, wte, wpe, vocab_start, B, T, C, V);
}
void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int vocab_start, int B, int T, int C, int V) {
  embedding_fw(out, tokens, wte, wpe, vocab_start, B, T, C, V);
}
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_start, int B, int T, int C, int V) {
  embedding_bw(dwte, dwpe, dout, tokens, vocab_start, B, T, C, V);
}
void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int vocab_start, int B, int T, int C, int V) {
  embedding_bw(dwte, dwpe, dout, tokens, vocab_start, B, T, C, V);
}

}  // namespace dtrain::kernels::cuda
