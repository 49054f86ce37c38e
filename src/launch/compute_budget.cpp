// BLAS thread configuration and the per-node sgemm peak.
#include "launch/compute_budget.hpp"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "comm/host_values.hpp"
#include "comm/mpi_wait.hpp"
#include "common/error.hpp"
#include "runtime/cuda_device.hpp"
#include "runtime/machine.hpp"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// How long the node's sgemm peak is timed at start-up, with every core of the node held for it: the
// best of the 1024^3 GEMMs (~20 ms each on one core) after a warm-up one. 0.1 s gives what 0.5 s
// gave to within 3% (94-97 against 94-98 GFLOP/s on one core, 183-191 against 185-188 on two,
// measured here), and every start (the test suite has hundreds) is 0.6 s shorter (1.17 against 1.77 s).
constexpr double kPeakSeconds = 0.1;

// Best GFLOP/s of n x n x n sgemm calls over `seconds` on the calling thread.
double best_sgemm_gflops(int n, double seconds) {
  std::vector<float> a(static_cast<std::size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  double best = 0.0;
  const auto stop = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * static_cast<double>(n) / dt / 1e9);
  } while (Clock::now() < stop);
  return best;
}

// A barrier that sleeps while it waits, whatever DTRAIN_MPI_WAIT says: a rank spinning on a
// core would take it from the measurement.
void sleeping_barrier(HostComm comm) {
  MPI_Request req;
  MPI_CHECK(MPI_Ibarrier(comm.mpi(), &req));
  mpi_wait_sleeping(req);
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort: unpinned if not allowed
}

}  // namespace

int configure_blas_threads(int requested, int rank_cores, int node_cores, int local_ranks, std::string& warning) {
  int threads = requested;
  const char* origin = "system.threads_per_rank";
  if (threads <= 0) {
    const char* slurm = std::getenv("SLURM_CPUS_PER_TASK");
    threads = slurm ? std::atoi(slurm) : 0;
    origin = "SLURM_CPUS_PER_TASK";
  }
  if (threads <= 0) {
    threads = std::max(1, node_cores / std::max(1, local_ranks));
    origin = nullptr;
  }
  if (threads > rank_cores) {
    if (origin)
      warning = std::string(origin) + "=" + std::to_string(threads) + " is more than the " + std::to_string(rank_cores) +
                " core(s) this rank may run on; using " + std::to_string(rank_cores) + " BLAS thread(s)";
    threads = rank_cores;
  }
  threads = std::max(1, threads);
  openblas_set_num_threads(threads);
  return threads;
}

double sgemm_peak_gflops(const std::vector<int>& cpus, int restore_threads, double seconds) {
  const int n = 1024;
  // Every core at once, one single-threaded GEMM each.
  openblas_set_num_threads(1);
  std::vector<double> per_core(cpus.size(), 0.0);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < cpus.size(); ++i)
    threads.emplace_back([&, i] {
      pin_to(cpus[i]);
      per_core[i] = best_sgemm_gflops(n, seconds);
    });
  for (auto& t : threads) t.join();
  double together = 0.0;
  for (double g : per_core) together += g;
  // One GEMM threaded over all of them, where there are several: 1024^3 on up to 8 cores (about 11 ms
  // on two, so the time allowed holds a few), 2048^3 beyond, where a smaller product leaves cores idle.
  // A 2048^3 warm-up and timed product on two cores alone took 0.36 s of every start.
  double threaded = 0.0;
  if (cpus.size() > 1) {
    openblas_set_num_threads(static_cast<int>(cpus.size()));
    threaded = best_sgemm_gflops(cpus.size() > 8 ? 2 * n : n, seconds / 2);
  }
  openblas_set_num_threads(restore_threads);
  return std::max(together, threaded);
}

ComputeBudget measure_compute(HostComm world, HostComm node, int threads_per_rank, double node_peak_gflops, Watchdog* watchdog) {
  const int local_rank = node.rank(), local_size = node.size();
  // The node's cores: the union of its ranks' affinity masks.
  std::vector<unsigned char> mask(CPU_SETSIZE, 0), all(CPU_SETSIZE, 0);
  const std::vector<int> mine = affinity_cpus();
  for (int c : mine) mask[static_cast<std::size_t>(c)] = 1;
  MPI_CHECK(MPI_Allreduce(mask.data(), all.data(), CPU_SETSIZE, MPI_UNSIGNED_CHAR, MPI_MAX, node.mpi()));
  std::vector<int> node_cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (all[static_cast<std::size_t>(c)]) node_cpus.push_back(c);

  ComputeBudget b;
  b.node_cores = std::max(1, static_cast<int>(node_cpus.size()));
  b.threads = configure_blas_threads(threads_per_rank, std::max(1, static_cast<int>(mine.size())), b.node_cores, local_size, b.warning);
  double node_peak = 0.0;
  if (node_peak_gflops > 0) {
    if (local_rank == 0) node_peak = node_peak_gflops;
  } else if (node_peak_gflops == 0) {
    auto w = watch(watchdog, {"measuring the node's sgemm peak", "node", -1, 0});
    sleeping_barrier(node);  // nobody else computes (or spins) on the node meanwhile
    if (local_rank == 0) node_peak = sgemm_peak_gflops(node_cpus.empty() ? mine : node_cpus, b.threads, kPeakSeconds);
    sleeping_barrier(node);
  }
  b.job_peak_gflops = all_reduce(world, node_peak, HostOp::sum);
  return b;
}

double measure_gpu_peak(HostComm world, HostComm node, int device, Precision precision, double gpu_peak_gflops, Watchdog* watchdog,
                        int& gpus) {
  MPI_Comm split;
  MPI_CHECK(MPI_Comm_split(node.mpi(), device, world.rank(), &split));
  const HostComm same_gpu = split;
  const int first = same_gpu.rank();
  double peak = first == 0 ? gpu_peak_gflops : 0.0;
  if (gpu_peak_gflops <= 0) {
    auto w = watch(watchdog, {"measuring the GPU's GEMM peak", "node", -1, 0});
    sleeping_barrier(same_gpu);
    if (first == 0) peak = gpu_gemm_peak_gflops(precision, 0.5);
    sleeping_barrier(same_gpu);
  }
  const double job = all_reduce(world, peak, HostOp::sum);
  gpus = all_reduce(world, first == 0 ? 1 : 0, HostOp::sum);
  MPI_CHECK(MPI_Comm_free(&split));
  return job;
}

}  // namespace dtrain
