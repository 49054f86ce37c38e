// run_calibrate: every rank measures at once (what a training step sees), the times are combined over
// the ranks, plan/calibration fits them, rank 0 writes format_cluster's text.
#include "app/calibrate_command.hpp"

#include <cblas.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <vector>

#include "common/collective_check.hpp"
#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "plan/calibration.hpp"
#include "runtime/compute_budget.hpp"
#include "runtime/machine.hpp"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Seconds of one call of `op` on every rank at once: the same repetition count everywhere (enough for
// `budget` seconds), the median over 5 rounds of the slowest rank's mean: what a training step, whose
// time is also read as a median, typically sees (the fastest round would be the machine at its best).
double time_collectively(MPI_Comm comm, double budget, const std::function<void()>& op) {
  op();  // warm-up (buffers, connections)
  double t0 = now();
  op();
  double one = now() - t0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, comm));
  const int reps = std::max(2, std::min(2000, static_cast<int>(budget / 5 / std::max(one, 1e-7))));
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    MPI_CHECK(MPI_Barrier(comm));
    t0 = now();
    for (int i = 0; i < reps; ++i) op();
    double t = (now() - t0) / reps;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm));
    rounds.push_back(t);
  }
  std::nth_element(rounds.begin(), rounds.begin() + 2, rounds.end());
  return rounds[2];
}

// GEMMs of rows x c by c x c as a linear layer runs them: forward (NN), input gradient (NT) and weight
// gradient (TN); the sample is the mean of the three. Each call takes the next of several copies of
// its operands (64 MiB in all, beyond the caches), so that it starts cold, as a training step's GEMMs
// do after the kernels between them.
std::vector<GemmSample> measure_gemms(MPI_Comm world, bool quick) {
  const std::vector<int> rows = quick ? std::vector<int>{128, 512} : std::vector<int>{64, 256, 1024, 2048};
  const std::vector<int> widths = quick ? std::vector<int>{32, 128, 512} : std::vector<int>{16, 32, 64, 128, 256, 512, 1024};
  std::vector<GemmSample> samples;
  for (int m : rows)
    for (int c : widths) {
      const std::size_t xs = static_cast<std::size_t>(m) * c, ws = static_cast<std::size_t>(c) * c, set = 2 * xs + ws;
      const std::size_t copies = std::max<std::size_t>(2, (std::size_t{16} << 20) / set);  // 16 Mi floats
      std::vector<float> buffers(copies * set, 0.25f);
      std::size_t next = 0;
      const double t = time_collectively(world, quick ? 0.03 : 0.15, [&] {
        float* x = buffers.data() + next * set;
        float *w = x + xs, *y = w + ws;
        next = (next + 1) % copies;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, c, c, 1.0f, x, c, w, c, 0.0f, y, c);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, c, c, 1.0f, y, c, w, c, 0.0f, x, c);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, c, m, 1.0f, x, c, y, c, 0.0f, w, c);
      });
      samples.push_back({2.0 * m * c * c, t / 3});
    }
  return samples;
}

// Bytes/s of one rank copying a buffer (read + write) while every rank does.
double measure_memory_bandwidth(MPI_Comm world, bool quick) {
  const std::size_t bytes = quick ? (std::size_t{8} << 20) : (std::size_t{64} << 20);
  std::vector<char> a(bytes, 1), b(bytes, 0);
  const double t = time_collectively(world, quick ? 0.05 : 0.5, [&] {
    std::memcpy(b.data(), a.data(), bytes);
    std::swap(a, b);
  });
  return 2.0 * static_cast<double>(bytes) / t;
}

// Bytes/s of one block's elementwise kernels as the cost model counts them: forward two layer norms,
// two residual adds and the GELU of the 4C-wide activation, (10 + 8) x N x C values; the backward of
// the norms and the GELU, which the model counts as twice the forward's bytes.
double measure_elementwise_bandwidth(MPI_Comm world, bool quick) {
  const long N = quick ? 256 : 1024;
  const int C = 256;
  const auto n = static_cast<std::size_t>(N) * C;
  std::vector<float> x(n, 0.5f), y(n), dy(n, 0.01f), dx(n), w(C, 1.0f), b(C, 0.0f), dw(C), db(C), mean(N), rstd(N);
  std::vector<float> h(4 * n, 0.3f), g(4 * n), dg(4 * n, 0.01f), dh(4 * n);
  const auto& k = kernels::kernel_table<float>(kernels::Backend::host);
  const double t = time_collectively(world, quick ? 0.05 : 0.4, [&] {
    for (int norm = 0; norm < 2; ++norm) {
      k.layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
      k.residual_forward(dx.data(), x.data(), y.data(), static_cast<long>(n));
    }
    k.gelu_forward(g.data(), h.data(), static_cast<long>(4 * n));
    k.gelu_backward(dh.data(), h.data(), dg.data(), static_cast<long>(4 * n));
    for (int norm = 0; norm < 2; ++norm)
      k.layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  });
  return 3.0 * 18 * sizeof(float) * static_cast<double>(n) / t;
}

// Bytes/s at which memory is given back (madvise MADV_DONTNEED, as the host device's discard) and
// written again (zero-filled page faults), beyond writing memory that stays resident.
double measure_release_bandwidth(MPI_Comm world, bool quick) {
  const std::size_t bytes = quick ? (std::size_t{4} << 20) : (std::size_t{32} << 20);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fatal(std::string("dtrain calibrate: mmap failed: ") + std::strerror(errno));
  std::memset(p, 1, bytes);
  const double budget = quick ? 0.05 : 0.4;
  const double resident = time_collectively(world, budget, [&] { std::memset(p, 1, bytes); });
  const double released = time_collectively(world, budget, [&] {
    if (madvise(p, bytes, MADV_DONTNEED) != 0) fatal(std::string("dtrain calibrate: madvise failed: ") + std::strerror(errno));
    std::memset(p, 1, bytes);
  });
  munmap(p, bytes);
  // A release no slower than a resident write (within the timing's noise) costs a memory pass.
  return static_cast<double>(bytes) / std::max(released - resident, resident);
}

// The five collectives at every group size dividing the world, over message sizes. `spans_nodes`:
// whether some group crosses a node boundary (then the samples describe the inter-node link).
std::vector<CommSample> measure_collectives(MPI_Comm world, int node_id, bool quick, bool& spans_nodes) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  const std::vector<double> sizes = quick ? std::vector<double>{4096, 262144, 2097152}
                                          : std::vector<double>{1024, 8192, 65536, 524288, 4194304};
  std::vector<CommSample> samples;
  spans_nodes = false;
  for (int g = 2; g <= size; ++g) {
    if (size % g) continue;
    MPI_Comm group;
    MPI_CHECK(MPI_Comm_split(world, rank / g, rank, &group));
    int lo = node_id, hi = node_id, crosses = 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, group));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, group));
    crosses = lo != hi;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &crosses, 1, MPI_INT, MPI_MAX, world));
    spans_nodes = spans_nodes || crosses;
    const int me = rank % g, next = (me + 1) % g, prev = (me + g - 1) % g;
    for (double bytes : sizes) {
      const int count = static_cast<int>(bytes / 4) / g * g;  // floats, divisible by the group
      std::vector<float> in(static_cast<std::size_t>(count), 1.0f), out(in.size(), 0.0f);
      const double budget = quick ? 0.02 : 0.1;
      auto sample = [&](Collective op, const std::function<void()>& f) {
        samples.push_back({op, 4.0 * count, g, time_collectively(world, budget, f)});
      };
      sample(Collective::all_reduce, [&] { MPI_CHECK(MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, group)); });
      sample(Collective::reduce_scatter,
             [&] { MPI_CHECK(MPI_Reduce_scatter_block(in.data(), out.data(), count / g, MPI_FLOAT, MPI_SUM, group)); });
      sample(Collective::all_gather,
             [&] { MPI_CHECK(MPI_Allgather(in.data(), count / g, MPI_FLOAT, out.data(), count / g, MPI_FLOAT, group)); });
      sample(Collective::send_recv, [&] {
        MPI_CHECK(MPI_Sendrecv(in.data(), count, MPI_FLOAT, next, 7, out.data(), count, MPI_FLOAT, prev, 7, group, MPI_STATUS_IGNORE));
      });
      sample(Collective::all_to_all, [&] { MPI_CHECK(MPI_Alltoall(in.data(), count / g, MPI_FLOAT, out.data(), count / g, MPI_FLOAT, group)); });
    }
    MPI_CHECK(MPI_Comm_free(&group));
  }
  return samples;
}

}  // namespace

int run_calibrate(MPI_Comm world, const CalibrateOptions& o) {
  if (o.out.empty()) throw UserError("dtrain calibrate needs --out FILE (where to write the cluster description)");
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  MPI_CHECK(MPI_Comm_size(node, &local_size));
  int node_id = rank, nodes = local_rank == 0;  // node id: the world rank of the node's first rank
  MPI_CHECK(MPI_Bcast(&node_id, 1, MPI_INT, 0, node));
  MPI_CHECK(MPI_Comm_free(&node));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &nodes, 1, MPI_INT, MPI_SUM, world));
  const ComputeBudget budget = measure_compute(world, 0, nullptr);  // BLAS threads as training sets them

  const std::vector<GemmSample> gemms = measure_gemms(world, o.quick);
  ClusterSpec c;
  c.device = ComputeDevice::cpu;
  c.nodes = nodes;
  c.devices_per_node = size / nodes;
  c.peak_fp32 = c.peak_bf16 = peak_rate(gemms);  // bf16 runs compute in fp32 on the host
  c.gemm_efficiency = efficiency_table(gemms, c.peak_fp32);
  c.memory_bandwidth = measure_memory_bandwidth(world, o.quick);
  c.elementwise_bandwidth = measure_elementwise_bandwidth(world, o.quick);
  c.release_bandwidth = measure_release_bandwidth(world, o.quick);
  double memory = static_cast<double>(node_memory_bytes()) / local_size;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &memory, 1, MPI_DOUBLE, MPI_MIN, world));
  c.memory = memory;
  bool spans_nodes = false;
  const std::vector<CommSample> comm = measure_collectives(world, node_id, o.quick, spans_nodes);
  std::string links;
  if (comm.empty()) {
    c.intra_node = c.inter_node = {c.memory_bandwidth, 0.0};
    links = "one rank: no link measured; both links are written as the memory bandwidth";
  } else if (spans_nodes) {
    c.intra_node = c.inter_node = fit_link(comm);
    links = "the groups crossed nodes: both links are the fit of all collectives (run one rank per node apart to separate them)";
  } else {
    c.intra_node = c.inter_node = fit_link(comm);
    links = "one node: the inter-node link is not measured and is written equal to the intra-node link";
  }
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  c.name = o.name.empty() ? std::string(host) + " (" + std::to_string(size) + " ranks, " + std::to_string(budget.threads) +
                                " BLAS thread(s) each, dtrain calibrate)"
                          : o.name;
  collective_check(world, [&] {  // rank 0 writes; its error ends every rank
    if (rank != 0) return;
    std::ofstream out(o.out);
    out << "# " << o.out << ": measured by `mpirun -np " << size << " dtrain calibrate" << (o.quick ? " --quick" : "") << "` on "
        << host << "\n# " << links << "\n" << format_cluster(c);
    if (!out) throw UserError("dtrain calibrate: cannot write --out '" + o.out + "'; give a writable path");
  });
  if (rank != 0) return 0;
  std::printf("dtrain calibrate: %d rank(s) on %d node(s), %d BLAS thread(s) per rank\n", size, nodes, budget.threads);
  std::printf("  sgemm peak %.2f GFLOP/s per rank; efficiency by FLOPs:", c.peak_fp32 / 1e9);
  for (const auto& [f, e] : c.gemm_efficiency) std::printf(" %.3g:%.2f", f, e);
  std::printf("\n  memory bandwidth %.2f GB/s per rank, %.2f GB per rank; elementwise kernels %.2f GB/s; memory released and "
              "taken again at %.2f GB/s\n",
              c.memory_bandwidth / 1e9, c.memory / 1e9, c.elementwise_bandwidth / 1e9, c.release_bandwidth / 1e9);
  if (!comm.empty()) {
    double worst = 0;
    for (const auto& s : comm) worst = std::max(worst, std::abs(model_seconds(s, c.intra_node) / s.seconds - 1));
    std::printf("  link %.3f GB/s (all-reduce %.3f GB/s, reduce-scatter %.3f GB/s), %.2f us (%zu collective timings, worst fit "
                "error %.0f%%)\n",
                c.intra_node.bandwidth / 1e9, c.intra_node.all_reduce_rate() / 1e9, c.intra_node.reduce_scatter_rate() / 1e9,
                c.intra_node.latency * 1e6, comm.size(), 100 * worst);
  }
  std::printf("  %s\nwrote %s\n", links.c_str(), o.out.c_str());
  return 0;
}

}  // namespace dtrain
