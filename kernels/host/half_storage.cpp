// Host backend, 16-bit storage: every kernel of kernel_api.inc for KT = bf16 and KT = fp16, as "16-bit
// storage, fp32 arithmetic": the 16-bit inputs are widened into fp32 scratch, the fp32 kernel runs, and
// the outputs are rounded back (to nearest even; fp16 overflows to infinity beyond 65504). The results
// are what a bf16 or fp16 run on a GPU computes up to summation order. This backend exists so that the
// mixed-precision logic (master weights, 16-bit activations and messages, loss scaling, checkpoints) is
// tested on every machine; it is not tuned for speed. The scratch is per thread and reused; it only
// grows (on the first steps), and no device memory is involved. The kernels themselves are written
// once, for a storage type S, in half_storage_kernels.inc.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.hpp"

namespace dtrain::kernels::host {
namespace {

// fp32 <-> bf16 over arrays, eight lanes at a time with AVX2 (the same rounding as to_bf16: nearest
// even, NaN stays a quiet NaN), the scalar conversions for the tail and on other machines.
void widen_all(float* out, const bf16* x, std::size_t n) {
  std::size_t i = 0;
#ifdef __AVX2__
  for (; i + 8 <= n; i += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
#endif
  for (; i < n; ++i) out[i] = to_float(x[i]);
}

void narrow_all(bf16* out, const float* x, std::size_t n) {
  std::size_t i = 0;
#ifdef __AVX2__
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000), half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, abs_mask), inf);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(half, lsb));
    const __m256i top = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, _mm256_or_si256(bits, quiet), is_nan), 16);
    // 8 x u32 (each < 2^16) -> 8 x u16: pack within the 128-bit lanes, then bring the lanes together.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(top, top), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
#endif
  for (; i < n; ++i) out[i] = to_bf16(x[i]);
}

// fp32 <-> fp16 over arrays, eight lanes at a time with the F16C instructions (round to nearest
// even, overflow to infinity, NaN a quiet NaN: what to_fp16 does, checked bit for bit in
// tests/unit/test_fp16.cpp), the scalar conversions for the tail and on other machines.
void widen_all(float* out, const fp16* x, std::size_t n) {
  std::size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
#endif
  for (; i < n; ++i) out[i] = to_float(x[i]);
}

void narrow_all(fp16* out, const float* x, std::size_t n) {
  std::size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) out[i] = to_fp16(x[i]);
}

// fp32 buffers handed out in order during one kernel call, reused by the next.
class Scratch {
 public:
  Scratch() : pool_(pool()) { next_ = 0; }
  float* buffer(std::size_t n) {
    if (next_ == pool_.size()) pool_.emplace_back();
    std::vector<float>& v = pool_[next_++];
    if (v.size() < n) v.resize(n);
    return v.data();
  }
  template <typename S>
  float* wide(const S* x, std::size_t n) {
    if (!x) return nullptr;
    float* out = buffer(n);
    widen_all(out, x, n);
    return out;
  }

 private:
  static std::vector<std::vector<float>>& pool() {
    thread_local std::vector<std::vector<float>> p;
    return p;
  }
  std::vector<std::vector<float>>& pool_;
  std::size_t next_ = 0;
};

template <typename S>
void store(S* out, const float* x, std::size_t n) {
  narrow_all(out, x, n);
}

std::size_t sz(long n) { return static_cast<std::size_t>(n); }

// The rows of a strided block as fp32: rows of stride `stride`, the last `width` wide.
template <typename S>
float* wide_rows(Scratch& s, const S* x, int rows, int stride, int width) {
  return rows > 0 ? s.wide(x, sz(rows - 1) * sz(stride) + sz(width)) : nullptr;
}

}  // namespace

#define S ::dtrain::bf16
#include "kernels/host/half_storage_kernels.inc"
#undef S
#define S ::dtrain::fp16
#include "kernels/host/half_storage_kernels.inc"
#undef S

}  // namespace dtrain::kernels::host
