// The kernel backends: host (CPU threads, CBLAS) and cuda (GPU kernels, cuBLAS).
#pragma once

namespace dtrain::kernels {

enum class Backend { host, cuda };

}  // namespace dtrain::kernels
