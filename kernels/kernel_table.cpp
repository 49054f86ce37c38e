// kernel_table(): the host table always; the CUDA table once every CUDA twin exists.
#include "kernels/kernels.hpp"

#include "common/error.hpp"

namespace dtrain::kernels {

const KernelTable& kernel_table(Backend backend) {
  static const KernelTable host_table = {
#define DTRAIN_KERNEL(ret, name, args) &host::name,
#include "kernels/kernel_api.inc"
#undef DTRAIN_KERNEL
      Backend::host};
  if (backend == Backend::host) return host_table;
  fatal("the CUDA kernel backend is not complete in this version of dtrain; use system.device=cpu");
}

}  // namespace dtrain::kernels
