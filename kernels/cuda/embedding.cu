// CUDA backend: token + position embedding. The backward is deterministic without atomics: the
// tokens' rows are sorted (CUB's stable radix sort of (row, position) pairs, so a row's positions stay in
// token order), then one block per run of equal rows sums that run's rows of dout over its eight warps
// in a fixed order, 16-byte packs per lane, and adds the sum to the row of dwte once. The same bits on
// every run; the work is proportional to the tokens, not to the vocabulary. The position embedding's
// gradient is a column sum over the samples, or, with positions given (packed documents restart them),
// the same sorted sum keyed by position.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

template <typename KT>
__global__ void embedding_forward_kernel(KT* out, const int* tokens, const KT* wte, const KT* wpe, const int* positions, int vocab_start,
                                         int T, int C, int V, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long r = i / C;
  const int c = static_cast<int>(i % C);
  const int row = tokens[r] - vocab_start;
  float v = row >= 0 && row < V ? ld(wte[static_cast<long>(row) * C + c]) : 0.0f;
  if (wpe) v += ld(wpe[(positions ? positions[r] : r % T) * static_cast<long>(C) + c]);
  out[i] = st<KT>(v);
}

// Each position's key, its row of this rank's vocabulary slice (V for a token outside it: sorted last,
// skipped), and its value, the position.
__global__ void embedding_sort_keys_kernel(int* keys, int* positions, const int* tokens, int vocab_start, int V, int rows) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const int row = tokens[i] - vocab_start;
  keys[i] = row >= 0 && row < V ? row : V;
  positions[i] = i;
}

// A block per sorted position; the block at the first position of a run of equal rows sums the run:
// warp w takes the run's positions w, w + 8, ... in order, each lane a pack of columns, and the eight
// partial sums are added in warp order (shared memory, a chunk of 32 packs of columns at a time) and
// then to the row once. A frequent token's long run is spread over the block's warps; the order is
// fixed, so the sum is the same bits every run.
template <typename KT, bool kVector>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    embedding_backward_wte_kernel(float* __restrict__ dwte, const KT* __restrict__ dout, const int* __restrict__ keys,
                                  const int* __restrict__ positions, int rows, int C, int V) {
  constexpr int P = kPack<KT>, kChunk = 32 * P;  // columns a warp covers at once
  __shared__ float part[kWarpsPerBlock][kChunk];
  const int p = blockIdx.x;
  const int row = keys[p];
  if (row >= V || (p > 0 && keys[p - 1] == row)) return;  // the same for the whole block
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int end = p + 1;  // the run's end: 32 keys a step, the first that differs
  for (;;) {
    const int q = end + lane;
    const unsigned ended = __ballot_sync(0xffffffffu, q >= rows || keys[q] != row);
    if (ended) {
      end += __ffs(ended) - 1;
      break;
    }
    end += 32;
  }
  float* g = dwte + static_cast<long>(row) * C;
  for (int c0 = 0; c0 < C; c0 += kChunk) {
    const int i = c0 + lane * P;
    float sum[P] = {};
    if (i < C) {
#pragma unroll 4
      for (int k = p + warp; k < end; k += kWarpsPerBlock) {
        float v[P];
        load_n<kVector>(v, dout + static_cast<long>(positions[k]) * C, i, C);
#pragma unroll
        for (int e = 0; e < P; ++e) sum[e] += v[e];
      }
    }
#pragma unroll
    for (int e = 0; e < P; ++e) part[warp][lane * P + e] = sum[e];
    __syncthreads();
    if (warp == 0 && i < C) {
      float total[P], acc[P];  // the fp32 gradient row: P elements are whole packs of fp32 too
#pragma unroll
      for (int e = 0; e < P; ++e) total[e] = part[0][lane * P + e];
      for (int w = 1; w < kWarpsPerBlock; ++w)
#pragma unroll
        for (int e = 0; e < P; ++e) total[e] += part[w][lane * P + e];
      load_n<kVector>(acc, g, i, C);
#pragma unroll
      for (int e = 0; e < P; ++e) acc[e] += total[e];
      store_n<kVector>(g, acc, i, C);
    }
    __syncthreads();  // part is reused by the next chunk
  }
}

// The sort's buffers, kept between calls and grown when a call has more positions (cudaMalloc waits for
// the device: only while the first steps find the largest size).
struct SortBuffers {
  int *keys = nullptr, *sorted_keys = nullptr, *positions = nullptr, *sorted_positions = nullptr;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  int capacity = 0;
  void reserve(int rows, int end_bit) {
    std::size_t need = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, need, keys, sorted_keys, positions, sorted_positions, rows, 0, end_bit));
    if (rows > capacity) {
      for (int* q : {keys, sorted_keys, positions, sorted_positions}) CUDA_CHECK(cudaFree(q));
      for (int** q : {&keys, &sorted_keys, &positions, &sorted_positions}) CUDA_CHECK(cudaMalloc(q, sizeof(int) * rows));
      capacity = rows;
    }
    if (need > temp_bytes) {
      CUDA_CHECK(cudaFree(temp));
      CUDA_CHECK(cudaMalloc(&temp, need));
      temp_bytes = need;
    }
  }
};
SortBuffers& sort_buffers() {
  static SortBuffers b;
  return b;
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
void embedding_fw(KT* out, const int* tokens, const KT* wte, const KT* wpe, const int* positions, int vocab_start, int B, int T, int C,
                  int V) {
  const long n = static_cast<long>(B) * T * C;
  embedding_forward_kernel<<<blocks_for(n), kThreads>>>(out, tokens, wte, wpe, positions, vocab_start, T, C, V, n);
  DTRAIN_LAUNCH_CHECK();
}

// dtable[key - key_start] += rows of dout, for keys (tokens, or positions) in [key_start, key_start + V).
template <typename KT>
void embedding_bw_rows(float* dwte, const KT* dout, const int* tokens, int vocab_start, long rows, int C, int V) {
  if (rows <= 0) return;
  if (rows > INT32_MAX - 64) fatal("embedding_backward: " + std::to_string(rows) + " tokens in one call exceed the sort's int range");
  const int n = static_cast<int>(rows);
  int end_bit = 1;  // keys run to V inclusive
  while ((1L << end_bit) <= V) ++end_bit;
  SortBuffers& b = sort_buffers();
  b.reserve(n, end_bit);
  embedding_sort_keys_kernel<<<blocks_for(n), kThreads>>>(b.keys, b.positions, tokens, vocab_start, V, n);
  DTRAIN_LAUNCH_CHECK();
  std::size_t temp_bytes = b.temp_bytes;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b.temp, temp_bytes, b.keys, b.sorted_keys, b.positions, b.sorted_positions, n, 0, end_bit));
  DTRAIN_LAUNCH_CHECK();
  if (packs_fit<KT>(C, dout) && packs_fit<float>(C, dwte))
    embedding_backward_wte_kernel<KT, true><<<n, 32 * kWarpsPerBlock>>>(dwte, dout, b.sorted_keys, b.sorted_positions, n, C, V);
  else
    embedding_backward_wte_kernel<KT, false><<<n, 32 * kWarpsPerBlock>>>(dwte, dout, b.sorted_keys, b.sorted_positions, n, C, V);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void embedding_bw_wpe(float* dwpe, const KT* dout, int B, int T, int C) {
  embedding_backward_wpe_kernel<<<blocks_for(static_cast<long>(T) * C), kThreads>>>(dwpe, dout, B, T, C);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void embedding_bw(float* dwte, float* dwpe, const KT* dout, const int* tokens, const int* positions, int vocab_start, int B, int T, int C,
                  int V, int P) {
  embedding_bw_rows(dwte, dout, tokens, vocab_start, static_cast<long>(B) * T, C, V);
  if (dwpe && positions)
    embedding_bw_rows(dwpe, dout, positions, 0, static_cast<long>(B) * T, C, P);
  else if (dwpe)
    embedding_bw_wpe(dwpe, dout, B, T, C);
}

}  // namespace

#define DTRAIN_EMBEDDING(KT)                                                                                                          \
  void embedding_forward(KT* out, const int* tokens, const KT* wte, const KT* wpe, const int* positions, int vocab_start, int B, int T, \
                         int C, int V) {                                                                                              \
    embedding_fw(out, tokens, wte, wpe, positions, vocab_start, B, T, C, V);                                                          \
  }                                                                                                                                   \
  void embedding_backward(float* dwte, float* dwpe, const KT* dout, const int* tokens, const int* positions, int vocab_start, int B,   \
                          int T, int C, int V, int P) {                                                                               \
    embedding_bw(dwte, dwpe, dout, tokens, positions, vocab_start, B, T, C, V, P);                                                    \
  }
DTRAIN_EMBEDDING(float)
DTRAIN_EMBEDDING(bf16)
DTRAIN_EMBEDDING(fp16)
#undef DTRAIN_EMBEDDING

}  // namespace dtrain::kernels::cuda
