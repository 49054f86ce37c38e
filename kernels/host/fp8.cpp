// Host backend: the fp8 emulation of system.precision = fp8 (kernels/fp8_math.hpp), elementwise on the
// storage type (no fp32 scratch: each element is widened, rounded and stored back on its own).
#include "common/storage_type.hpp"
#include "kernels/fp8_math.hpp"
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
void round_to_fp8(KT* out, const KT* x, const float* amax, long n, int format) {
  const auto f = static_cast<Fp8Format>(format);
  const float scale = fp8_scale(*amax, f);
  for (long i = 0; i < n; ++i) out[i] = from_float<KT>(fp8_round(to_float(x[i]), scale, f));
}

}  // namespace

void fp8_amax(float* amax, const float* x, long n) { amax_of(amax, x, n); }
void fp8_amax(float* amax, const bf16* x, long n) { amax_of(amax, x, n); }
void fp8_amax(float* amax, const fp16* x, long n) { amax_of(amax, x, n); }
void fp8_round(float* out, const float* x, const float* amax, long n, int format) { round_to_fp8(out, x, amax, n, format); }
void fp8_round(bf16* out, const bf16* x, const float* amax, long n, int format) { round_to_fp8(out, x, amax, n, format); }
void fp8_round(fp16* out, const fp16* x, const float* amax, long n, int format) { round_to_fp8(out, x, amax, n, format); }

}  // namespace dtrain::kernels::host
