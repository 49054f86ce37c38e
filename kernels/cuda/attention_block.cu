// CUDA backend: attention of one block of query rows against one block of key/value rows (ring
// attention under context parallelism, generation with a key/value cache) and the column copies around
// it; the keys a row sees come from kernels/attention_visibility.hpp, as on the host. A warp per (query row, head)
// walks the block's keys with an online softmax and merges the block into the running output and
// log-sum-exp; the backward recomputes each probability from the final log-sum-exp: a warp per
// (query row, head) sums dQ, a warp per (key row, key/value group) sums dK and dV over the group's
// heads and the query rows in order. No atomics and no shared accumulators: the same bits every run.
// Each lane holds HD/32 dims of a head (HD <= 32 * kMaxDimsPerLane).
#include <cmath>
#include <string>

#include "common/error.hpp"
#include "kernels/attention_visibility.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kMaxDimsPerLane = 8;

// Dot product of a head's HD dims of two rows (fp32 sums, a fixed order).
template <typename A, typename B>
__device__ float head_dot(const A* a, const B* b, int HD) {
  float s = 0.0f;
  for (int d = threadIdx.x % 32; d < HD; d += 32) s += ld(a[d]) * ld(b[d]);
  return warp_sum(s);
}

template <typename KT>
__global__ void block_forward_kernel(float* out, float* lse, const KT* q, int qs, const KT* kv, int ks, int Tq, int Tk, int NH,
                                     int NKV, int HD, int q_pos, int k_pos, KeyVisibility visible, float scale) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= Tq * NH) return;
  const int i = warp / NH, h = warp % NH;
  const KT* qi = q + static_cast<long>(i) * qs + h * HD;
  const int g = h / (NH / NKV);
  const KeyRange r = block_visible_keys(q_pos + i, visible.first_key(i, q_pos + i), k_pos, Tk);
  float acc[kMaxDimsPerLane] = {};
  float m = -INFINITY, l = 0.0f;
  for (int j = r.first; j < r.last; ++j) {
    const KT* kj = kv + static_cast<long>(j) * ks + g * HD;
    const KT* vj = kj + NKV * HD;
    const float s = head_dot(qi, kj, HD) * scale;
    const float m_new = fmaxf(m, s);
    const float rescale = expf(m - m_new), p = expf(s - m_new);
    l = l * rescale + p;
    for (int k = 0, d = lane; d < HD; ++k, d += 32) acc[k] = acc[k] * rescale + p * ld(vj[d]);
    m = m_new;
  }
  if (r.first == r.last) return;  // no key of this block: the running result stays
  const float block_lse = m + logf(l);
  float* before = lse + static_cast<long>(h) * Tq + i;
  const float b = *before;
  const float after = isinf(b) && b < 0 ? block_lse : fmaxf(b, block_lse) + log1pf(expf(-fabsf(b - block_lse)));
  const float keep = isinf(b) && b < 0 ? 0.0f : expf(b - after), mine = expf(block_lse - after) / l;
  float* o = out + static_cast<long>(i) * NH * HD + h * HD;
  for (int k = 0, d = lane; d < HD; ++k, d += 32) o[d] = o[d] * keep + acc[k] * mine;
  __syncwarp();
  if (lane == 0) *before = after;
}

template <typename KT>
__global__ void block_dq_kernel(float* dq, const KT* dout, const KT* out, const float* lse, const KT* q, int qs, const KT* kv,
                                int ks, int Tq, int Tk, int NH, int NKV, int HD, int q_pos, int k_pos, KeyVisibility visible, float scale) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= Tq * NH) return;
  const int i = warp / NH, h = warp % NH, g = h / (NH / NKV);
  const long row = static_cast<long>(i) * NH * HD + h * HD;
  const KT* qi = q + static_cast<long>(i) * qs + h * HD;
  const float D = head_dot(dout + row, out + row, HD), L = lse[static_cast<long>(h) * Tq + i];
  const KeyRange r = block_visible_keys(q_pos + i, visible.first_key(i, q_pos + i), k_pos, Tk);
  float acc[kMaxDimsPerLane] = {};
  for (int j = r.first; j < r.last; ++j) {
    const KT* kj = kv + static_cast<long>(j) * ks + g * HD;
    const float p = expf(head_dot(qi, kj, HD) * scale - L);
    const float ds = p * (head_dot(dout + row, kj + NKV * HD, HD) - D) * scale;
    for (int k = 0, d = lane; d < HD; ++k, d += 32) acc[k] += ds * ld(kj[d]);
  }
  for (int k = 0, d = lane; d < HD; ++k, d += 32) dq[row + d] += acc[k];
}

template <typename KT>
__global__ void block_dkv_kernel(float* dkv, int dks, const KT* dout, const KT* out, const float* lse, const KT* q, int qs,
                                 const KT* kv, int ks, int Tq, int Tk, int NH, int NKV, int HD, int q_pos, int k_pos, KeyVisibility visible,
                                 float scale) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= Tk * NKV) return;
  const int j = warp / NKV, g = warp % NKV, group = NH / NKV;
  const KT* kj = kv + static_cast<long>(j) * ks + g * HD;
  const KT* vj = kj + NKV * HD;
  float dk[kMaxDimsPerLane] = {}, dv[kMaxDimsPerLane] = {};
  const int first_query = max(0, k_pos + j - q_pos);  // the first query row at or after the key's position
  for (int h = g * group; h < (g + 1) * group; ++h)
    for (int i = first_query; i < Tq; ++i) {
      if (!sees_key(q_pos + i, visible.first_key(i, q_pos + i), k_pos + j)) break;  // later rows' first keys are later too
      const long row = static_cast<long>(i) * NH * HD + h * HD;
      const KT* qi = q + static_cast<long>(i) * qs + h * HD;
      const float p = expf(head_dot(qi, kj, HD) * scale - lse[static_cast<long>(h) * Tq + i]);
      const float ds = p * (head_dot(dout + row, vj, HD) - head_dot(dout + row, out + row, HD)) * scale;
      for (int k = 0, d = lane; d < HD; ++k, d += 32) {
        dv[k] += p * ld(dout[row + d]);
        dk[k] += ds * ld(qi[d]);
      }
    }
  float* dkj = dkv + static_cast<long>(j) * dks + g * HD;
  for (int k = 0, d = lane; d < HD; ++k, d += 32) {
    dkj[d] += dk[k];
    dkj[NKV * HD + d] += dv[k];
  }
}

void check_head_dim(int HD) {
  if (HD > 32 * kMaxDimsPerLane)
    fatal("attention_block on CUDA supports head dims up to " + std::to_string(32 * kMaxDimsPerLane) + ", not " + std::to_string(HD));
}

int warp_blocks(long warps) { return blocks_for(warps * 32); }

template <typename KT>
void block_attention_fw(float* out, float* lse, const KT* q, int qs, const KT* kv, int ks, int Tq, int Tk, int NH, int NKV, int HD, int q_pos,
                        int k_pos, KeyVisibility visible) {
  check_head_dim(HD);
  block_forward_kernel<<<warp_blocks(static_cast<long>(Tq) * NH), kThreads>>>(out, lse, q, qs, kv, ks, Tq, Tk, NH, NKV, HD, q_pos, k_pos,
                                                                              visible, 1.0f / sqrtf(static_cast<float>(HD)));
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void block_attention_bw(float* dq, float* dkv, int dks, const KT* dout, const KT* out, const float* lse, const KT* q, int qs, const KT* kv,
              int ks, int Tq, int Tk, int NH, int NKV, int HD, int q_pos, int k_pos, KeyVisibility visible) {
  check_head_dim(HD);
  const float scale = 1.0f / sqrtf(static_cast<float>(HD));
  block_dq_kernel<<<warp_blocks(static_cast<long>(Tq) * NH), kThreads>>>(dq, dout, out, lse, q, qs, kv, ks, Tq, Tk, NH, NKV, HD,
                                                                         q_pos, k_pos, visible, scale);
  DTRAIN_LAUNCH_CHECK();
  block_dkv_kernel<<<warp_blocks(static_cast<long>(Tk) * NKV), kThreads>>>(dkv, dks, dout, out, lse, q, qs, kv, ks, Tq, Tk, NH, NKV,
                                                                           HD, q_pos, k_pos, visible, scale);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
__global__ void copy_columns_kernel(KT* out, const KT* inp, long N, int W, int col, int w) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < N * w) out[i] = inp[(i / w) * W + col + i % w];
}

template <typename KT>
__global__ void narrow_columns_kernel(KT* out, const float* inp, long N, int W, int col, int w) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < N * w) out[(i / w) * W + col + i % w] = st<KT>(inp[i]);
}

template <typename KT>
__global__ void insert_columns_kernel(KT* out, const KT* inp, long N, int W, int col, int w) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < N * w) out[(i / w) * W + col + i % w] = inp[i];
}

template <typename KT>
void copy_cols(KT* out, const KT* inp, long N, int W, int col, int w) {
  copy_columns_kernel<<<blocks_for(N * w), kThreads>>>(out, inp, N, W, col, w);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void insert_cols(KT* out, const KT* inp, long N, int W, int col, int w) {
  insert_columns_kernel<<<blocks_for(N * w), kThreads>>>(out, inp, N, W, col, w);
  DTRAIN_LAUNCH_CHECK();
}
template <typename KT>
void narrow_cols(KT* out, const float* inp, long N, int W, int col, int w) {
  narrow_columns_kernel<<<blocks_for(N * w), kThreads>>>(out, inp, N, W, col, w);
  DTRAIN_LAUNCH_CHECK();
}

}  // namespace

#define DTRAIN_ATTENTION_BLOCK(KT)                                                                                                     \
  void attention_block_forward(float* out, float* lse, float*, const KT* q, int qs, const KT* kv, int ks, int Tq, int Tk, int NH,      \
                               int NKV, int HD, int q_pos, int k_pos, KeyVisibility visible) {                                          \
    block_attention_fw(out, lse, q, qs, kv, ks, Tq, Tk, NH, NKV, HD, q_pos, k_pos, visible);                                         \
  }                                                                                                                                    \
  void attention_block_backward(float* dq, float* dkv, int dks, float*, const KT* dout, const KT* out, const float* lse, const KT* q,  \
                                int qs, const KT* kv, int ks, int Tq, int Tk, int NH, int NKV, int HD, int q_pos, int k_pos,           \
                                KeyVisibility visible) {                                                                                \
    block_attention_bw(dq, dkv, dks, dout, out, lse, q, qs, kv, ks, Tq, Tk, NH, NKV, HD, q_pos, k_pos, visible);                     \
  }                                                                                                                                    \
  void copy_columns(KT* out, const KT* inp, long N, int W, int col, int w) { copy_cols(out, inp, N, W, col, w); }                      \
  void insert_columns(KT* out, const KT* inp, long N, int W, int col, int w) { insert_cols(out, inp, N, W, col, w); }                  \
  void narrow_columns(KT* out, const float* inp, long N, int W, int col, int w) { narrow_cols(out, inp, N, W, col, w); }
DTRAIN_ATTENTION_BLOCK(float)
DTRAIN_ATTENTION_BLOCK(bf16)
DTRAIN_ATTENTION_BLOCK(fp16)
#undef DTRAIN_ATTENTION_BLOCK

}  // namespace dtrain::kernels::cuda
