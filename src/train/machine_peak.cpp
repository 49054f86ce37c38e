// BLAS thread configuration and the sgemm ceiling measurement.
#include "train/machine_peak.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

namespace dtrain {

int configure_blas_threads(int threads_per_rank, int local_ranks) {
  int threads = threads_per_rank;
  if (threads <= 0) {
    const char* slurm = std::getenv("SLURM_CPUS_PER_TASK");
    threads = slurm ? std::atoi(slurm) : 0;
  }
  if (threads <= 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, cores / std::max(1, local_ranks));
  }
  openblas_set_num_threads(threads);
  return threads;
}

double measure_sgemm_gflops(int n, double seconds, bool sustained) {
  std::vector<float> a(static_cast<std::size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f);
  using clock = std::chrono::steady_clock;
  double best = 0.0, calls = 0.0;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  const auto start = clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  do {
    const auto t0 = clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * static_cast<double>(n) / dt / 1e9);
    calls += 1.0;
  } while (clock::now() < stop);
  if (!sustained) return best;
  return calls * 2.0 * n * n * static_cast<double>(n) / std::chrono::duration<double>(clock::now() - start).count() / 1e9;
}

}  // namespace dtrain
