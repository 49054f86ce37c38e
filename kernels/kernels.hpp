// The one kernel header: declares every kernel of kernel_api.inc, for the three storage types (float,
// bf16, fp16), in each backend's namespace (dtrain::kernels::host, and dtrain::kernels::cuda in CUDA builds),
// and defines KernelTable<KT>, the dispatch table through which the model calls whichever backend
// runs. The model never names a backend.
#pragma once

#include <cstdint>

#include "common/storage_type.hpp"
#include "kernels/attention_visibility.hpp"
#include "kernels/backend.hpp"
#include "kernels/rope_frequencies.hpp"

namespace dtrain::kernels {

// One tensor's piece of an AdamW update (adamw_update): `count` elements from element `offset` of the
// master weights, moments, compute copy and gradient given, its weight decay, and `first`, the sum of
// the earlier runs' counts (where its elements start when the runs are laid end to end).
struct AdamRun {
  long offset, count, first;
  float weight_decay;
};

#define DTRAIN_KERNEL(ret, name, args) ret name args;
namespace host {
#define KT float
#include "kernels/kernel_api.inc"
#undef KT
#define KT ::dtrain::bf16
#include "kernels/kernel_api.inc"
#undef KT
#define KT ::dtrain::fp16
#include "kernels/kernel_api.inc"
#undef KT
}  // namespace host
namespace cuda {
#define KT float
#include "kernels/kernel_api.inc"
#undef KT
#define KT ::dtrain::bf16
#include "kernels/kernel_api.inc"
#undef KT
#define KT ::dtrain::fp16
#include "kernels/kernel_api.inc"
#undef KT
}  // namespace cuda
#undef DTRAIN_KERNEL

template <typename Storage>
struct KernelTable {
#define KT Storage
#define DTRAIN_KERNEL(ret, name, args) ret(*name) args;
#include "kernels/kernel_api.inc"
#undef DTRAIN_KERNEL
#undef KT
  Backend backend;
};

// The table of a backend for storage type Storage (float, bf16 or fp16). Asking for cuda in a build without
// CUDA is a fatal error.
template <typename Storage>
const KernelTable<Storage>& kernel_table(Backend backend);

}  // namespace dtrain::kernels
