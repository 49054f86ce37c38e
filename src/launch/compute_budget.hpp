// The compute a job has and uses: BLAS threads per rank (never more than the cores the rank may run
// on), and the job's peak for MFU (GPU runs: the GEMM peak of each GPU, summed). On CPU: per node, single-precision GEMM measured once on all the
// cores the job's ranks on that node may use, summed over the nodes. One measurement per node, by one
// rank while the others wait, so ranks sharing cores never share (and under-count) the peak.
#pragma once
#include <string>
#include <vector>

#include "comm/host_comm.hpp"
#include "config/choices.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

// Threads for this rank: `requested` if > 0, else SLURM_CPUS_PER_TASK, else its fair share of the
// node's cores (node_cores / ranks on the node); capped at the cores it may run on, with a warning
// when a request is capped. Sets them in OpenBLAS and returns the count.
int configure_blas_threads(int requested, int rank_cores, int node_cores, int local_ranks, std::string& warning);

// GFLOP/s of single-precision GEMM on `cpus` together: the larger of (one single-threaded GEMM
// pinned to each CPU, all at once, summed) and (one GEMM using all of them). Best calls over about
// `seconds`, so the result is a ceiling. Restores OpenBLAS's thread count.
double sgemm_peak_gflops(const std::vector<int>& cpus, int restore_threads, double seconds);

struct ComputeBudget {
  int threads = 1;              // BLAS threads of this rank
  int node_cores = 1;           // cores the job's ranks on this rank's node may use
  double job_peak_gflops = 0;   // sum over nodes of sgemm_peak_gflops(node cores)
  std::string warning;          // non-empty when the requested threads were capped
};

// Collective over world: threads for every rank and the job's peak; node: this node's ranks
// (LaunchEnv::node). node_peak_gflops > 0 is each node's peak as given (nothing measured), 0 measures
// it, < 0 leaves the job's peak 0 (a GPU run, whose peak is its GPUs'). The measurement is reported to
// the watchdog, so a rank stuck in it is named.
ComputeBudget measure_compute(HostComm world, HostComm node, int threads_per_rank, double node_peak_gflops, Watchdog* watchdog);

// Collective over world, GPU runs: the job's peak is the GEMM peak of each GPU the job uses, summed:
// gpu_peak_gflops when > 0, else measured once per GPU (gpu_gemm_peak_gflops in the run's precision, by
// the first of the ranks sharing it). Returns the number of distinct GPUs in `gpus`.
double measure_gpu_peak(HostComm world, HostComm node, int device, Precision precision, double gpu_peak_gflops, Watchdog* watchdog,
                        int& gpus);

}  // namespace dtrain
