// CUDA backend: GEMMs with an epilogue of cuBLASLt (device_math.cuh): the forward's bias added
// (gemm_bias), so that a linear layer writes its output once instead of filling bias rows and reading
// them back; and the MLP's GELU applied on the way out
// of its first layer (gemm_bias_gelu) and its gradient on the way out of the second layer's input
// gradient (gemm_dgelu), instead of passes of their own. Each shape's descriptors
// and algorithm are made once (cuBLASLt's heuristic, the first call) and kept. The bias has the
// output's type (cuBLASLt takes no 16-bit bias with an fp32 output: a bf16 or fp16 bias is widened).
// The fp8 GEMMs (gemm_fp8_lt) go through the same plans, with their operands' scales.
#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/kernels.hpp"

namespace dtrain::kernels::cuda {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;  // cuBLASLt's advice for Hopper

cublasLtHandle_t lt() {
  static const cublasLtHandle_t handle = [] {
    cublasLtHandle_t h;
    CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  }();
  return handle;
}

void* workspace() {
  static void* const p = [] {
    void* q = nullptr;
    CUDA_CHECK(cudaMalloc(&q, kWorkspaceBytes));
    return q;
  }();
  return p;
}

// The largest power of two up to 256 dividing the address: the alignment the algorithm may assume.
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al) al /= 2;
  return al;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};
using PlanKey = std::array<long, 14>;  // epilogue, transa, transb, m, n, k, lda, ldb, A/B/D types, A/B/D alignments
// The data types of a GEMM: its operands (the same but for fp8's E4M3 x E5M2) and its output.
struct Types {
  cudaDataType_t a, b, d;
  bool fp8() const { return a == CUDA_R_8F_E4M3 || a == CUDA_R_8F_E5M2; }
};
template <typename TA, typename TD>
Types types_of() {
  return {cuda_type<TA>(), cuda_type<TA>(), cuda_type<TD>()};
}

template <typename T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}
template <typename T>
void set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof value));
}

const char* epilogue_name(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT          ? "plain"
         : e == CUBLASLT_EPILOGUE_BIAS           ? "bias"
         : e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? "bias+gelu"
         : e == CUBLASLT_EPILOGUE_GELU_AUX      ? "gelu"
                                                : "dgelu";
}

const char* type_name(cudaDataType_t t) {
  return t == CUDA_R_32F ? "fp32" : t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "fp16" : t == CUDA_R_8F_E4M3 ? "e4m3" : "e5m2";
}

Plan make_plan(cublasLtEpilogue_t epilogue, bool transa, bool transb, int m, int n, int k, int lda, int ldb, Types t, std::uint32_t align_a,
               std::uint32_t align_b, std::uint32_t align_d) {
  Plan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));  // fp32 accumulation, no TF32
  set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, transa ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, transb ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, t.d);  // cuBLASLt takes no 16-bit bias with an fp32 output
  // fp8: the products accumulate in fp32 throughout (no FAST_ACCUM, whose Hopper accumulator keeps fewer
  // bits between promotions).
  if (t.fp8()) set(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<std::int8_t>(0));
  // The GELU epilogues' auxiliary matrix (the pre-activation) has D's type and layout.
  if (epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_DGELU)
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(m));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, t.a, transa ? k : m, transa ? m : k, lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, t.b, transb ? n : k, transb ? k : n, ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, t.d, m, n, m));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(kWorkspaceBytes));
  // Split-K partial sums are added in fp32 (never in a 16-bit output), as the cuBLAS handle is told
  // (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION).
  set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
  set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
  set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
  set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(lt(), p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &count);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  p.found = rc == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  static int warned = 0;  // said for the first few shapes only (MoE layers meet many)
  if (p.found)
    p.algo = result.algo;
  else if (warned++ < 8)
    std::fprintf(stderr,
                 "dtrain: warning: cuBLASLt offers no %s-epilogue GEMM for m=%d n=%d k=%d (%s inputs, %s output): %s; "
                 "%s%s\n",
                 epilogue_name(epilogue), m, n, k, type_name(t.a), type_name(t.d),
                 rc == CUBLAS_STATUS_SUCCESS ? "no algorithm" : cublasGetStatusString(rc),
                 t.fp8() ? "dtrain's plain fp8 GEMM kernel runs it instead (correct, slow)" : "this layer does that in a separate pass",
                 warned == 8 ? " (further shapes are not reported)" : "");
  return p;
}

// A device buffer of floats for one epilogue operand at a time, grown when a layer is wider.
class GrowingFloats {
 public:
  float* at_least(int n) {
    if (n > capacity_) {
      CUDA_CHECK(cudaFree(p_));
      CUDA_CHECK(cudaMalloc(&p_, sizeof(float) * n));
      capacity_ = n;
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  int capacity_ = 0;
};

// An fp32 copy of a 16-bit bias, for the epilogue of a GEMM with an fp32 output (both 16-bit types).
template <typename KT>
const float* widened_bias(const KT* bias, int m) {
  static GrowingFloats copy;
  float* p = copy.at_least(m);
  widen(p, bias, m);
  return p;
}

void destroy(Plan& p) {
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.a));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.b));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.d));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(p.desc));
}

// Plans kept per instantiation: a dense model has a handful of shapes; MoE experts see a new row count
// (and offset pointers) every step, so beyond this many a call makes its plan, uses it and drops it. The
// heuristic picks the same algorithm for a shape either way, so results do not depend on the cache.
constexpr std::size_t kMaxPlans = 64;

// D = op(A) op(B) + beta D with `epilogue` on data of types t; pointers(desc) sets the call's bias,
// auxiliary and scale pointers once the plan is known to exist. false, with nothing done, where cuBLASLt
// has no algorithm.
template <typename Pointers>
bool lt_matmul(cublasLtEpilogue_t epilogue, float beta, bool transa, bool transb, int m, int n, int k, Types t, const void* A, int lda,
               const void* B, int ldb, void* D, Pointers pointers) {
  static std::map<PlanKey, Plan> plans;
  const std::uint32_t align_a = alignment_of(A), align_b = alignment_of(B), align_d = alignment_of(D);
  const PlanKey key{static_cast<long>(epilogue), transa, transb, m, n, k, lda, ldb, static_cast<long>(t.a), static_cast<long>(t.b),
                    static_cast<long>(t.d), align_a, align_b, align_d};
  Plan once;  // a plan not kept
  auto it = plans.find(key);
  if (it == plans.end() && plans.size() < kMaxPlans)
    it = plans.emplace(key, make_plan(epilogue, transa, transb, m, n, k, lda, ldb, t, align_a, align_b, align_d)).first;
  else if (it == plans.end())
    once = make_plan(epilogue, transa, transb, m, n, k, lda, ldb, t, align_a, align_b, align_d);
  Plan& p = it != plans.end() ? it->second : once;
  bool ran = false;
  if (p.found) {
    pointers(p.desc);
    const float alpha = 1.0f;
    CUBLAS_CHECK(
        cublasLtMatmul(lt(), p.desc, &alpha, A, p.a, B, p.b, &beta, D, p.d, D, p.d, &p.algo, workspace(), kWorkspaceBytes, 0));
    if (launch_checks_wait()) {  // name it by its shape in the profile, as gemm does
      char what[96];
      std::snprintf(what, sizeof what, "gemm+%s %c%c m=%d n=%d k=%d", epilogue_name(epilogue), transa ? 'T' : 'N', transb ? 'T' : 'N',
                    m, n, k);
      check_launch(what, __FILE__, __LINE__);
    }
    ran = true;
  }
  if (it == plans.end()) destroy(once);
  return ran;
}

}  // namespace

template <typename TA, typename TD>
bool gemm_bias(bool transa, bool transb, int m, int n, int k, const TA* A, int lda, const TA* B, int ldb, const TA* bias, TD* D) {
  constexpr bool kWidened = sizeof(TA) < sizeof(TD);  // a 16-bit bias widened into an aligned fp32 copy
  if (!kWidened && !aligned16(bias)) return false;
  return lt_matmul(CUBLASLT_EPILOGUE_BIAS, 0.0f, transa, transb, m, n, k, types_of<TA, TD>(), A, lda, B, ldb, D, [&](cublasLtMatmulDesc_t desc) {
    const void* epilogue_bias = bias;
    if constexpr (kWidened) epilogue_bias = widened_bias(bias, m);
    set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, epilogue_bias);
  });
}

template <typename T>
bool gemm_bias_gelu(bool transa, bool transb, int m, int n, int k, const T* A, int lda, const T* B, int ldb, const T* bias, T* D, T* pre) {
  if (!aligned16(bias) || !aligned16(pre) || m % 8 != 0) return false;  // the auxiliary output's alignment and row stride
  const cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  return lt_matmul(epilogue, 0.0f, transa, transb, m, n, k, types_of<T, T>(), A, lda, B, ldb, D, [&](cublasLtMatmulDesc_t desc) {
    if (bias) set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(pre));
  });
}

template <typename T>
bool gemm_dgelu(bool transa, bool transb, int m, int n, int k, const T* A, int lda, const T* B, int ldb, const T* pre, T* D) {
  if (!aligned16(pre) || m % 8 != 0) return false;
  return lt_matmul(CUBLASLT_EPILOGUE_DGELU, 0.0f, transa, transb, m, n, k, types_of<T, T>(), A, lda, B, ldb, D, [&](cublasLtMatmulDesc_t desc) {
    set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<const void*>(pre));
  });
}

template <typename TD>
bool gemm_fp8_lt(int m, int n, int k, const std::uint8_t* A, bool a_e5m2, const float* a_scale, const std::uint8_t* B, bool b_e5m2,
                 const float* b_scale, const TD* bias, float beta, TD* D) {
  if (bias && !aligned16(bias)) return false;
  const Types t{a_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3, b_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3, cuda_type<TD>()};
  const cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  return lt_matmul(epilogue, beta, true, false, m, n, k, t, A, k, B, k, D, [&](cublasLtMatmulDesc_t desc) {
    if (bias) set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(a_scale));
    set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(b_scale));
  });
}

template bool gemm_fp8_lt(int, int, int, const std::uint8_t*, bool, const float*, const std::uint8_t*, bool, const float*, const float*, float,
                          float*);
template bool gemm_fp8_lt(int, int, int, const std::uint8_t*, bool, const float*, const std::uint8_t*, bool, const float*, const bf16*, float,
                          bf16*);
template bool gemm_fp8_lt(int, int, int, const std::uint8_t*, bool, const float*, const std::uint8_t*, bool, const float*, const fp16*, float,
                          fp16*);
template bool gemm_bias(bool, bool, int, int, int, const float*, int, const float*, int, const float*, float*);
template bool gemm_bias(bool, bool, int, int, int, const bf16*, int, const bf16*, int, const bf16*, bf16*);
template bool gemm_bias(bool, bool, int, int, int, const bf16*, int, const bf16*, int, const bf16*, float*);
template bool gemm_bias(bool, bool, int, int, int, const fp16*, int, const fp16*, int, const fp16*, fp16*);
template bool gemm_bias(bool, bool, int, int, int, const fp16*, int, const fp16*, int, const fp16*, float*);
#define DTRAIN_GELU_GEMMS(T)                                                                                  \
  template bool gemm_bias_gelu(bool, bool, int, int, int, const T*, int, const T*, int, const T*, T*, T*); \
  template bool gemm_dgelu(bool, bool, int, int, int, const T*, int, const T*, int, const T*, T*);
DTRAIN_GELU_GEMMS(bf16)
DTRAIN_GELU_GEMMS(fp16)
#undef DTRAIN_GELU_GEMMS

}  // namespace dtrain::kernels::cuda
