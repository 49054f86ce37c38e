// Turing's form of the fp16 tensor-core product (two m16n8k8 instructions, what the attention kernels
// run below sm_80) against the one m16n8k16 instruction and against the product on the host: on a GPU
// of sm_80 or later, both forms run. Operands are small integers and halves (exact in fp16), so every
// product and every partial sum of the 16 terms is exact in fp32 whatever the order: the three results
// must be equal, bit for bit. A wrong register order (the halves of A swapped, b0 with b1) moves them by
// whole units.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <random>
#include <vector>

#include "mma_forms.hpp"

using namespace dtrain;

TEST_CASE("fp16 tensor-core product: Turing's two k8 steps equal one k16 step and the host", "[gpu][mma]") {
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (major < 8) return;  // the k16 form needs sm_80
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> value(-16, 16);
  std::vector<fp16> a(256), b(128);
  std::vector<float> fa(256), fb(128);
  for (int i = 0; i < 256; ++i) fa[i] = value(gen) * 0.5f, a[i] = to_fp16(fa[i]);
  for (int i = 0; i < 128; ++i) fb[i] = static_cast<float>(value(gen)), b[i] = to_fp16(fb[i]);
  std::vector<float> c16(128), c8(128), want(128, 0.0f);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j)
      for (int k = 0; k < 16; ++k) want[i * 8 + j] += fa[i * 16 + k] * fb[k * 8 + j];
  testing::fp16_mma_both_forms(a.data(), b.data(), c16.data(), c8.data());
  CHECK(c16 == want);
  CHECK(c8 == want);
}
