// kernel_table<T>(): the host tables always; the CUDA tables in CUDA builds.
#include "kernels/kernels.hpp"

#include "common/error.hpp"
#include "dtrain_config.hpp"

namespace dtrain::kernels {

template <typename Storage>
const KernelTable<Storage>& kernel_table(Backend backend) {
#define KT Storage
#define DTRAIN_KERNEL(ret, name, args) static_cast<ret(*) args>(&host::name),
  static const KernelTable<Storage> host_table = {
#include "kernels/kernel_api.inc"
      Backend::host};
#undef DTRAIN_KERNEL
  if (backend == Backend::host) return host_table;
#if DTRAIN_HAS_CUDA
#define DTRAIN_KERNEL(ret, name, args) static_cast<ret(*) args>(&cuda::name),
  static const KernelTable<Storage> cuda_table = {
#include "kernels/kernel_api.inc"
      Backend::cuda};
#undef DTRAIN_KERNEL
#undef KT
  return cuda_table;
#else
#undef KT
  fatal("system.device=cuda but this dtrain was built without CUDA; rebuild with nvcc on PATH or use system.device=cpu");
#endif
}

template const KernelTable<float>& kernel_table<float>(Backend);
template const KernelTable<bf16>& kernel_table<bf16>(Backend);
template const KernelTable<fp16>& kernel_table<fp16>(Backend);

}  // namespace dtrain::kernels
