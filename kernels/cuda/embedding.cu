// CUDA backend: token + position embedding. The backward is deterministic without atomics: a block
// owns 32 rows of dwte and walks every token in order, adding the rows of dout that belong to it (the
// host's order), so repeated tokens accumulate the same way on every run.
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
  __shared__ int tile[kTokenTile];
  const int first = blockIdx.x * kRowsPerBlock;
  for (long t0 = 0; t0 < rows; t0 += kTokenTile) {
    const int len = static_cast<int>(rows - t0 < kTokenTile ? rows - t0 : kTokenTile);
    __syncthreads();
    for (int j = threadIdx.x; j < len; j += blockDim.x) tile[j] = tokens[t0 + j] - vocab_start;
    __syncthreads();
    for (int j = 0; j < len; ++j) {
      const int row = tile[j];
      if (row < first || row >= first + kRowsPerBlock || row >= V) continue;
      float* g = dwte + static_cast<long>(row) * C;
      const KT* d = dout + (t0 + j) * C;
      for (int c = threadIdx.x; c < C; c += blockDim.x) g[c] += ld(d[c]);
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
void forward(KT* out, const int* tokens, const KT* wte, const KT* wpe, int vocab_start, int B, int T, int C, int V) {
  const long n = static_cast<long>(B) * T * C;
  embedding_forward_kernel<<<blocks_for(n), kThreads>>>(out, tokens, wte, wpe, vocab_start, T, C, V, n);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void backward(float* dwte, float* dwpe, const KT* dout, const int* tokens, int vocab_start, int B, int T, int C, int V) {
  embedding_backward_wte_kernel<<<blocks_for(V, kRowsPerBlock), kThreads>>>(dwte, dout, tokens, vocab_start,
                                                                                       static_cast<long>(B) * T, C, V);
  DTRAIN_LAUNCH_CHECK();
  if (!dwpe) return;
  embedding_backward_wpe_kernel<<<blocks_for(static_cast<long>(T) * C), kThreads>>>(dwpe, dout, B, T, C);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int vocab_start, int B, int T, int C, int V) {
  forward(out, tokens, wte, wpe, vocab_start, B, T, C, V);
}
void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int vocab_start, int B, int T, int C, int V) {
  forward(out, tokens, wte, wpe, vocab_start, B, T, C, V);
}
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_start, int B, int T, int C, int V) {
  backward(dwte, dwpe, dout, tokens, vocab_start, B, T, C, V);
}
void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int vocab_start, int B, int T, int C, int V) {
  backward(dwte, dwpe, dout, tokens, vocab_start, B, T, C, V);
}

}  // namespace dtrain::kernels::cuda
