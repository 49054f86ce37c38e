// Which code of a build a GPU runs, by the CUDA compatibility rules (machine code runs on GPUs of its
// major version at or above its minor; PTX is compiled at load for any newer GPU), and the start-up
// refusal where that code takes the other side of the kernels' sm_80 line or does not exist.
#include <catch2/catch.hpp>

#include "runtime/cuda_arch.hpp"

using dtrain::cuda_build_refusal;
using dtrain::cuda_code_for;

TEST_CASE("cuda_code_for picks the code the CUDA driver runs", "[cuda_arch]") {
  // CMake's plain entry "75" embeds sm_75 machine code and compute_75 PTX.
  CHECK(cuda_code_for(75, "75;80;90") == 75);
  CHECK(cuda_code_for(80, "75;80;90") == 80);
  CHECK(cuda_code_for(86, "75;80;90") == 80);   // an RTX 3090 runs sm_80 machine code
  CHECK(cuda_code_for(89, "75;80;90") == 80);   // an L40S too
  CHECK(cuda_code_for(90, "75;80;90") == 90);
  CHECK(cuda_code_for(100, "75;80;90") == 90);  // Blackwell: compute_90 PTX, compiled at load
  CHECK(cuda_code_for(80, "75;90") == 75);      // no sm_8x machine code: compute_75 PTX
  CHECK(cuda_code_for(70, "75;80;90") == 0);    // Volta: nothing older than it
  CHECK(cuda_code_for(80, "75-real;90") == 0);  // machine code only for 75: nothing an 8.0 runs
  CHECK(cuda_code_for(86, "75-virtual;90-real") == 75);
  CHECK(cuda_code_for(90, "90a") == 90);
  CHECK(cuda_code_for(90, "native") == -1);
  CHECK(cuda_code_for(90, "all-major") == -1);
  CHECK(cuda_code_for(90, "") == -1);
}

TEST_CASE("cuda_build_refusal refuses code from the other side of sm_80 and no code at all", "[cuda_arch]") {
  for (int cc : {75, 80, 86, 89, 90, 100}) CHECK(cuda_build_refusal(cc, "75;80;90").empty());
  CHECK(cuda_build_refusal(90, "75;90").empty());
  CHECK(cuda_build_refusal(75, "75;90").empty());
  const std::string a100 = cuda_build_refusal(80, "75;90");
  CHECK_THAT(a100, Catch::Contains("compiled for CUDA architectures 75;90") && Catch::Contains("compute capability 8.0") &&
                       Catch::Contains("sm_75") && Catch::Contains("-DCMAKE_CUDA_ARCHITECTURES=80"));
  CHECK_THAT(cuda_build_refusal(70, "75;80;90"), Catch::Contains("no code a GPU of compute capability 7.0 can run"));
  CHECK(cuda_build_refusal(90, "native").empty());  // CMake chose for the machine it configured on
}
