// The compute ceiling of this rank: single-precision GEMM throughput measured with the BLAS threads the
// rank uses, so MFU is "fraction of what this machine's sgemm can do", not of a datasheet number.
#pragma once

namespace dtrain {

// BLAS threads for this rank: system.threads_per_rank if > 0, else SLURM_CPUS_PER_TASK, else the
// node's cores divided by the ranks on it (at least 1). Sets them in OpenBLAS and returns the count.
int configure_blas_threads(int threads_per_rank, int local_ranks);

// GFLOP/s of cblas_sgemm on n x n x n over roughly `seconds` of repeats: the best single call, or
// (sustained) all calls over the whole time, which is what a rank gets when it shares cores.
double measure_sgemm_gflops(int n, double seconds, bool sustained = false);

}  // namespace dtrain
