// Which GPU code of a build a GPU runs (pure: no CUDA). The kernels take different paths below and from
// sm_80 (kernels/cuda/flash_tiles.cuh: cp.async, the bf16 and m16n8k16 tensor-core forms), so a GPU that
// would run code compiled for the other side of that line (an A100 JIT-compiling sm_75 PTX from a build
// for 75;90) is refused at start-up, as is one for which the build has no code at all.
#pragma once
#include <string>

namespace dtrain {

// The architecture whose code the CUDA driver runs on a GPU of compute capability `cc` (major x 10 +
// minor), from CMAKE_CUDA_ARCHITECTURES as CMake spells it ("75;80;90", "90-real", "75-virtual", "90a"):
// the newest machine code of the GPU's major version not newer than it, else the newest PTX not newer
// than it (compiled at load), else 0. -1 where the list cannot be read that way ("native", "all", empty).
int cuda_code_for(int cc, const std::string& architectures);

// "" when a build for `architectures` runs its intended kernels on a GPU of compute capability `cc`;
// otherwise what is wrong and how to rebuild.
std::string cuda_build_refusal(int cc, const std::string& architectures);

}  // namespace dtrain
