// CUDA backend: layer normalisation over the last dim (biased variance, two passes), a warp per row, the
// row held in registers when at most kFusedColumns wide (the backward in norm_backward.cuh: rows up to kFusedColumns wide in one pass with the weight and bias
// gradients; wider rows, the input gradient, then the weight and bias gradients as deterministic block
// column sums, both in one pass over the rows).
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_backward.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

template <typename KT>
__global__ void layernorm_forward_kernel(KT* out, float* mean, float* rstd, const KT* inp, const KT* weight, const KT* bias, long N,
                                         int C, float eps) {
  const long row = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += ld(x[c]);
  const float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float d = ld(x[c]) - m;
    v += d * d;
  }
  const float r = rsqrtf(warp_sum(v) / C + eps);
  KT* o = out + row * C;
  for (int c = lane; c < C; c += 32) o[c] = st<KT>((ld(x[c]) - m) * r * ld(weight[c]) + ld(bias[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// Rows of at most kFusedColumns: the row is read once, in 16-byte packs, into registers (kPacks packs a
// lane; zeros past C: load_pack), and the mean, the variance about it and the output come from there; the same two
// passes of arithmetic as above, in another order of the sums.
template <typename KT, bool kVector, int kPacks>
__global__ void layernorm_forward_packs_kernel(KT* out, float* mean, float* rstd, const KT* inp, const KT* weight, const KT* bias, long N,
                                               int C, float eps) {
  constexpr int P = kPack<KT>;
  const long row = static_cast<long>(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const KT* x = inp + row * C;
  float xv[kPacks][P];
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    load_pack<kVector>(xv[j], x, (j * 32 + lane) * P, C);
#pragma unroll
    for (int k = 0; k < P; ++k) s += xv[j][k];
  }
  const float m = warp_sum(s) / C;
  float v = 0.0f;
#pragma unroll
  for (int j = 0; j < kPacks; ++j)
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float d = (j * 32 + lane) * P + k < C ? xv[j][k] - m : 0.0f;
      v += d * d;
    }
  const float r = rsqrtf(warp_sum(v) / C + eps);
  KT* o = out + row * C;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int i = (j * 32 + lane) * P;
    if (i >= C) break;  // this lane's later packs are past the row too
    float wv[P], bv[P];
    load_n<kVector>(wv, weight, i, C);
    load_n<kVector>(bv, bias, i, C);
#pragma unroll
    for (int k = 0; k < P; ++k) xv[j][k] = (xv[j][k] - m) * r * wv[k] + bv[k];
    store_n<kVector>(o, xv[j], i, C);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// The weight and bias gradients' terms of row r, column c: dout * xhat and dout.
template <typename KT>
struct WeightAndBiasTerms {
  const KT *dout, *inp;
  const float *mean, *rstd;
  int C;
  __device__ void operator()(long r, int c, float (&v)[2]) const {
    const float dy = ld(dout[r * C + c]);
    v[0] = dy * ((ld(inp[r * C + c]) - mean[r]) * rstd[r]);
    v[1] = dy;
  }
};

template <typename KT>
void layernorm_fw(KT* out, float* mean, float* rstd, const KT* inp, const KT* weight, const KT* bias, long N, int C, float eps) {
  constexpr int P = kPack<KT>;
  const dim3 grid(blocks_for(N, kWarpsPerBlock)), block(32, kWarpsPerBlock);
  const bool vector = packs_fit<KT>(C, out, inp, weight, bias);
  auto packs_kernel = [&](auto packs_c) {
    constexpr int kP = decltype(packs_c)::value;
    if constexpr (kP * 32 * P <= kFusedColumns) {
      if (vector)
        layernorm_forward_packs_kernel<KT, true, kP><<<grid, block>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
      else
        layernorm_forward_packs_kernel<KT, false, kP><<<grid, block>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
    }
  };
  if (C <= kFusedColumns)
    with_lane_packs((C + 32 * P - 1) / (32 * P), packs_kernel);
  else
    layernorm_forward_kernel<<<grid, block>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
  DTRAIN_LAUNCH_CHECK();
}

template <typename KT>
void layernorm_bw(KT* dinp, float* dweight, float* dbias, const KT* dout, const KT* inp, const KT* weight, const float* mean,
              const float* rstd, long N, int C) {
  if (norm_backward_with_columns<true>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)) return;
  launch_norm_backward<true>(dinp, dout, inp, weight, mean, rstd, N, C);
  DTRAIN_LAUNCH_CHECK();
  column_sums<2>(ColumnOutputs<2>{{dweight, dbias}}, N, C, WeightAndBiasTerms<KT>{dout, inp, mean, rstd, C});
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias, long N, int C,
                       float eps) {
  layernorm_fw(out, mean, rstd, inp, weight, bias, N, C, eps);
}
void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias, long N, int C,
                       float eps) {
  layernorm_fw(out, mean, rstd, inp, weight, bias, N, C, eps);
}
void layernorm_forward(fp16* out, float* mean, float* rstd, const fp16* inp, const fp16* weight, const fp16* bias, long N, int C,
                       float eps) {
  layernorm_fw(out, mean, rstd, inp, weight, bias, N, C, eps);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                        const float* mean, const float* rstd, long N, int C) {
  layernorm_bw(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                        const float* mean, const float* rstd, long N, int C) {
  layernorm_bw(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward(fp16* dinp, float* dweight, float* dbias, const fp16* dout, const fp16* inp, const fp16* weight,
                        const float* mean, const float* rstd, long N, int C) {
  layernorm_bw(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

}  // namespace dtrain::kernels::cuda
