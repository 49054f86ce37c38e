// Host backend: the fp8 kernels of system.precision = fp8 (kernels/fp8_math.hpp). The GEMMs decode
// their operands' codes into fp32 at their scales (decode(code) / s, exact) and multiply them with CBLAS
// sgemm: each product of two decoded values is exact in fp32, so this computes what cuBLASLt's fp8 GEMM
// computes (the codes' products, times 1 / (s_A s_B)), up to the order of the sums.
#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/storage_type.hpp"
#include "kernels/fp8_math.hpp"
#include "kernels/host/host_math.hpp"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {
namespace {

template <typename KT>
void amax_of(float* amax, const KT* x, long n) {
  float m = 0.0f;
  for (long i = 0; i < n; ++i) m = fp8_amax_combine(m, std::fabs(to_float(x[i])));
  *amax = m;
}

template <typename KT>
void quantize(std::uint8_t* codes, const KT* x, const float* amax, long R, long C, int format, int transpose) {
  const auto f = static_cast<Fp8Format>(format);
  const float scale = fp8_scale(*amax, f);
  Kokkos::parallel_for(
      "fp8_quantize", HostRange(0, R), KOKKOS_LAMBDA(const long r) {
        for (long c = 0; c < C; ++c) codes[transpose ? c * R + r : r * C + c] = fp8_encode(to_float(x[r * C + c]) * scale, f);
      });
}

// The values of an operand's n codes: decode(code) / s, into reused per-thread scratch.
const float* decoded(std::vector<float>& buffer, const std::uint8_t* codes, int format, const float* amax, long n) {
  const auto f = static_cast<Fp8Format>(format);
  float value[256];
  const float inverse = 1.0f / fp8_scale(*amax, f);  // a power of two: exact
  for (int c = 0; c < 256; ++c) value[c] = fp8_decode(static_cast<std::uint8_t>(c), f) * inverse;
  buffer.resize(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) buffer[static_cast<std::size_t>(i)] = value[codes[i]];
  return buffer.data();
}

// out (M,N) = beta out + A B^T + bias, in fp32.
template <typename KT>
void product(float* out, float beta, const std::uint8_t* a, int a_format, const float* a_amax, const std::uint8_t* b, int b_format,
             const float* b_amax, const KT* bias, long M, long N, long K) {
  thread_local std::vector<float> va, vb;
  const float* A = decoded(va, a, a_format, a_amax, M * K);
  const float* B = decoded(vb, b, b_format, b_amax, N * K);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, A,
              static_cast<int>(K), B, static_cast<int>(K), beta, out, static_cast<int>(N));
  if (bias)
    for (long i = 0; i < M; ++i)
      for (long j = 0; j < N; ++j) out[i * N + j] += to_float(bias[j]);
}

// out (M,N) = beta out + A B^T + bias: into out itself in fp32, else through fp32 scratch rounded once.
template <typename TO, typename KT>
void gemm(TO* out, float beta, const std::uint8_t* a, int a_format, const float* a_amax, const std::uint8_t* b, int b_format,
          const float* b_amax, const KT* bias, long M, long N, long K) {
  if constexpr (std::is_same_v<TO, float>) {
    product(out, beta, a, a_format, a_amax, b, b_format, b_amax, bias, M, N, K);
  } else {
    thread_local std::vector<float> wide;
    wide.resize(static_cast<std::size_t>(M * N));
    product(wide.data(), 0.0f, a, a_format, a_amax, b, b_format, b_amax, bias, M, N, K);
    for (long i = 0; i < M * N; ++i) out[i] = from_float<TO>(wide[static_cast<std::size_t>(i)]);
  }
}

}  // namespace

#include "kernels/fp8_entries.inc"

}  // namespace dtrain::kernels::host
