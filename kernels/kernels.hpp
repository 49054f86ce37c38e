// The one kernel header: declares every kernel of kernel_api.inc in each backend's namespace
// (dtrain::kernels::host, and dtrain::kernels::cuda in CUDA builds) and defines KernelTable, the
// dispatch table through which the model calls whichever backend runs. The model never names a backend.
#pragma once

namespace dtrain::kernels {

#define DTRAIN_KERNEL(ret, name, args) ret name args;
namespace host {
#include "kernels/kernel_api.inc"
}
namespace cuda {
#include "kernels/kernel_api.inc"
}
#undef DTRAIN_KERNEL

enum class Backend { host, cuda };

struct KernelTable {
#define DTRAIN_KERNEL(ret, name, args) ret(*name) args;
#include "kernels/kernel_api.inc"
#undef DTRAIN_KERNEL
  Backend backend;
};

// The table of a backend. Asking for cuda in a build without CUDA is a fatal error.
const KernelTable& kernel_table(Backend backend);

}  // namespace dtrain::kernels
