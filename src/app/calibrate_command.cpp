// run_calibrate: every rank measures at once (what a training step sees) on the run's device, through
// the layers a step uses (the kernel table's GEMMs and elementwise kernels, the communication layer's
// collectives), the times are combined over the ranks, plan/calibration fits them, rank 0 writes
// format_cluster's text.
#include "app/calibrate_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <functional>
#include <tuple>
#include <vector>

#include "comm/collective_check.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "common/bf16.hpp"
#include "common/error.hpp"
#include "common/staged_file.hpp"
#include "kernels/attention_scratch.hpp"
#include "kernels/kernels.hpp"
#include "launch/compute_budget.hpp"
#include "launch/launch_env.hpp"
#include "launch/placement.hpp"
#include "plan/calibration.hpp"
#include "runtime/arena.hpp"
#include "runtime/gemm_operand.hpp"
#include "runtime/machine.hpp"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// `count` floats of device memory set to `value` (never-written host pages all read the one shared zero
// page, which stays in cache: a measurement must read real memory).
void fill(Device& device, float* p, std::size_t count, float value) {
  const std::vector<float> host(count, value);
  device.copy(p, host.data(), count * sizeof(float));
}

void barrier(Communicator& world) {
  int x = 0;
  world.all_reduce(&x, 1, DType::i32, ReduceOp::sum, {"calibrate: barrier"});
}

// The sizes measured: a GPU finishes a CPU's sizes in microseconds, where launch latency, not its GEMM
// rate or memory bandwidth, sets the time (an H100 gave 33 TFLOP/s bf16 at the CPU's largest GEMM), so
// on a GPU every size grows until a call takes tens of microseconds or more; --quick measures fewer.
struct MeasureSizes {
  std::vector<int> gemm_rows, gemm_widths;  // GEMMs of rows x c by c x c
  std::size_t copy_bytes, release_bytes;    // memory bandwidth; release
  long norm_rows;                           // the elementwise kernels' rows (of 256 columns)
};
MeasureSizes measure_sizes(const Device& device, bool quick) {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  if (device.is_host())
    return quick ? MeasureSizes{{128, 512}, {32, 128, 512}, 8 * MiB, 4 * MiB, 256}
                 : MeasureSizes{{64, 256, 1024, 2048}, {16, 32, 64, 128, 256, 512, 1024}, 64 * MiB, 32 * MiB, 1024};
  return quick ? MeasureSizes{{2048, 16384}, {256, 1024, 4096}, 256 * MiB, 256 * MiB, 16384}
               : MeasureSizes{{1024, 4096, 16384}, {128, 256, 512, 1024, 2048, 4096}, 1024 * MiB, 512 * MiB, 65536};
}

// Seconds of one call of `op` on every rank at once: the same repetition count everywhere (enough for
// `budget` seconds), the median over 5 rounds of the slowest rank's mean: what a training step, whose
// time is also read as a median, typically sees (the fastest round would be the machine at its best).
// The device's queued work is waited for before a time is read.
double time_collectively(Communicator& world, Device& device, double budget, const std::function<void()>& op) {
  op();  // warm-up (buffers, connections, the library's plans)
  device.synchronize();
  double t0 = now();
  op();
  device.synchronize();
  double one = now() - t0;
  world.all_reduce(&one, 1, DType::f64, ReduceOp::max, {"calibrate: the slowest rank's time"});
  const int reps = std::max(2, std::min(2000, static_cast<int>(budget / 5 / std::max(one, 1e-7))));
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    barrier(world);
    t0 = now();
    for (int i = 0; i < reps; ++i) op();
    device.synchronize();
    double t = (now() - t0) / reps;
    world.all_reduce(&t, 1, DType::f64, ReduceOp::max, {"calibrate: the slowest rank's time"});
    rounds.push_back(t);
  }
  std::nth_element(rounds.begin(), rounds.begin() + 2, rounds.end());
  return rounds[2];
}

// GEMMs of rows x c by c x c as a linear layer runs them, through the kernel table of the run's device
// and storage type KT: forward (matmul_forward) and backward (matmul_backward: the input gradient and
// the fp32 weight gradient); the sample is the mean of the three products. Each call takes the next of
// several copies of its operands (64 MiB in all, beyond the caches), so that it starts cold, as a
// training step's GEMMs do after the kernels between them; the operands are random values (never
// zeros, which tensor cores multiply faster).
template <typename KT>
std::vector<GemmSample> measure_gemms(Communicator& world, Device& device, bool quick) {
  const auto& k = kernels::kernel_table<KT>(device.backend());
  const MeasureSizes sizes = measure_sizes(device, quick);
  const std::vector<int>&rows = sizes.gemm_rows, &widths = sizes.gemm_widths;
  std::vector<GemmSample> samples;
  for (int m : rows)
    for (int c : widths) {
      const std::size_t xs = static_cast<std::size_t>(m) * c, ws = static_cast<std::size_t>(c) * c;
      const std::size_t set = (3 * xs + ws) * sizeof(KT) + ws * sizeof(float);  // x, y, dx, w and dw, bytes
      const std::size_t copies = std::max<std::size_t>(2, (std::size_t{64} << 20) / set);
      Arena buffers(device, copies * set);
      // One copy filled with random operands, the others copies of it (cold means other addresses).
      std::vector<char> host(set);
      fill_gemm_operand(reinterpret_cast<KT*>(host.data()), 3 * xs + ws, 0x6a09e667f3bcc908ull);
      device.copy(buffers.data(), host.data(), set);
      for (std::size_t i = 1; i < copies; ++i) device.copy(static_cast<char*>(buffers.data()) + i * set, buffers.data(), set);
      std::size_t next = 0;
      const double t = time_collectively(world, device, quick ? 0.03 : 0.15, [&] {
        char* base = static_cast<char*>(buffers.data()) + next * set;
        KT* x = reinterpret_cast<KT*>(base);
        KT *y = x + xs, *dx = y + xs, *w = dx + xs;
        float* dw = reinterpret_cast<float*>(w + ws);
        next = (next + 1) % copies;
        k.matmul_forward(y, x, w, nullptr, m, c, c);
        k.matmul_backward(dx, dw, nullptr, y, x, w, m, c, c);
      });
      samples.push_back({2.0 * m * c * c, t / 3, static_cast<double>(c)});
    }
  return samples;
}

// Bytes/s of one rank copying a buffer in the device's memory (read + write) while every rank does.
double measure_memory_bandwidth(Communicator& world, Device& device, bool quick) {
  const std::size_t bytes = measure_sizes(device, quick).copy_bytes;
  Arena a(device, bytes), b(device, bytes);
  fill(device, a.as<float>(), bytes / sizeof(float), 1.0f);
  fill(device, b.as<float>(), bytes / sizeof(float), 0.0f);
  const double t = time_collectively(world, device, quick ? 0.05 : 0.5, [&] {
    device.copy(b.data(), a.data(), bytes);
    std::swap(a, b);
  });
  return 2.0 * static_cast<double>(bytes) / t;
}

// Offload's rates on a GPU (system.offload_optimizer): bytes/s of a copy from the device to pinned host
// memory and back (one rank's link, every rank at once), and of a copy in host memory (the host's
// AdamW streams its state at about that rate). A host needs neither: its device is the host.
std::pair<double, double> measure_host_rates(Communicator& world, Device& device, bool quick) {
  const std::size_t bytes = measure_sizes(device, quick).copy_bytes / 4;
  Arena on_device(device, bytes);
  PinnedBuffer pinned(device, bytes);
  fill(device, on_device.as<float>(), bytes / sizeof(float), 1.0f);
  const double link = time_collectively(world, device, quick ? 0.05 : 0.3, [&] {
    device.copy(pinned.as<char>(), on_device.data(), bytes);
    device.copy(on_device.data(), pinned.as<char>(), bytes);
  });
  Device& host = host_device();
  Arena a(host, bytes), b(host, bytes);
  fill(host, a.as<float>(), bytes / sizeof(float), 1.0f);
  fill(host, b.as<float>(), bytes / sizeof(float), 0.0f);
  const double memory = time_collectively(world, host, quick ? 0.05 : 0.3, [&] { host.copy(b.data(), a.data(), bytes); });
  return {2.0 * static_cast<double>(bytes) / link, 2.0 * static_cast<double>(bytes) / memory};
}

// Bytes/s of one block's elementwise kernels as the cost model counts them, on the device: forward two
// layer norms, two residual adds and the GELU of the 4C-wide activation, (10 + 8) x N x C values; the
// backward of the norms and the GELU, which the model counts as twice the forward's bytes.
double measure_elementwise_bandwidth(Communicator& world, Device& device, bool quick) {
  const long N = measure_sizes(device, quick).norm_rows;
  const int C = 256;
  const auto n = static_cast<std::size_t>(N) * C;
  // (N,C) x, y, dy, dx; (4N,C) h, g, dg, dh; (C) w, b, dw, db; (N) mean, rstd: one arena.
  Arena all(device, (4 * n + 16 * n + 4 * static_cast<std::size_t>(C) + 2 * static_cast<std::size_t>(N)) * sizeof(float));
  float* x = all.as<float>();
  float *y = x + n, *dy = y + n, *dx = dy + n, *h = dx + n, *g = h + 4 * n, *dg = g + 4 * n, *dh = dg + 4 * n;
  float *w = dh + 4 * n, *b = w + C, *dw = b + C, *db = dw + C, *mean = db + C, *rstd = mean + N;
  fill(device, x, n, 0.5f);
  fill(device, dy, n, 0.01f);
  fill(device, h, 4 * n, 0.3f);
  fill(device, dg, 4 * n, 0.01f);
  fill(device, w, C, 1.0f);
  fill(device, b, C, 0.1f);
  const auto& k = kernels::kernel_table<float>(device.backend());
  const double t = time_collectively(world, device, quick ? 0.05 : 0.4, [&] {
    for (int norm = 0; norm < 2; ++norm) {
      k.layernorm_forward(y, mean, rstd, x, w, b, N, C, 1e-5f);
      k.residual_forward(dx, x, y, static_cast<long>(n));
    }
    k.gelu_forward(g, h, static_cast<long>(4 * n));
    k.gelu_backward(dh, h, dg, static_cast<long>(4 * n));
    for (int norm = 0; norm < 2; ++norm) k.layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
  });
  return 3.0 * 18 * sizeof(float) * static_cast<double>(n) / t;
}

// Seconds per causal score of the fused attention (forward and backward) beyond its GEMMs as the cost
// model prices them (cost_model.cpp: two products of T x T x HD FLOPs, the causal half, per sample and
// head, on the efficiency curve of width HD at `peak`; the backward twice the forward): the softmax,
// its gradient and the tiles' bookkeeping. Through the kernel table of the run's device and storage type
// KT, at head dims 32 and 64 (the fit's mean; a larger head dim only moves work into the GEMMs), on
// random packed rows. 0 when the GEMMs explain all of it.
template <typename KT>
double measure_attention_score_seconds(Communicator& world, Device& device, bool quick, const ClusterSpec& c, double peak) {
  const auto& k = kernels::kernel_table<KT>(device.backend());
  const int B = 1, NH = device.is_host() ? 4 : 32, T = device.is_host() ? (quick ? 256 : 512) : (quick ? 1024 : 2048);
  double per_score = 0;
  for (const int HD : {32, 64}) {
    const std::size_t W = static_cast<std::size_t>(3) * NH * HD, rows = static_cast<std::size_t>(B) * T;
    const std::size_t qkv_n = rows * W, out_n = rows * NH * HD, lse_n = static_cast<std::size_t>(B) * NH * T,
                      scratch_n = kernels::attention_scratch_floats(B, T, NH);
    Arena buffers(device, 2 * (qkv_n + 2 * out_n) * sizeof(KT) + (lse_n + scratch_n) * sizeof(float));
    KT* qkv = buffers.as<KT>();
    KT *dqkv = qkv + qkv_n, *out = dqkv + qkv_n, *dout = out + out_n;
    float* lse = reinterpret_cast<float*>(dout + out_n);
    float* scratch = lse + lse_n;
    std::vector<char> host((qkv_n + 2 * out_n) * sizeof(KT));
    fill_gemm_operand(reinterpret_cast<KT*>(host.data()), qkv_n + 2 * out_n, 0xbb67ae8584caa73bull);
    device.copy(qkv, host.data(), qkv_n * sizeof(KT));
    device.copy(dout, host.data() + qkv_n * sizeof(KT), out_n * sizeof(KT));
    const double t = time_collectively(world, device, quick ? 0.05 : 0.3, [&] {
      k.attention_forward(out, lse, scratch, qkv, kernels::KeyVisibility{}, B, T, NH, NH, HD);
      k.attention_backward(dqkv, scratch, dout, out, lse, qkv, kernels::KeyVisibility{}, B, T, NH, NH, HD);
    });
    const double flops = static_cast<double>(T) * T * HD;  // one product, the causal half
    const double gemms = 3 * 2 * B * NH * flops / (peak * c.efficiency(flops, HD));
    per_score += std::max(0.0, t - gemms) / (static_cast<double>(B) * NH * T * T / 2) / 2;
  }
  return per_score;
}

// Bytes/s at which memory is given back (Device::discard: on the host madvise(MADV_DONTNEED), on a
// GPU zeroing) and written again, beyond writing memory that stays resident.
double measure_release_bandwidth(Communicator& world, Device& device, bool quick) {
  const std::size_t bytes = measure_sizes(device, quick).release_bytes;
  Arena p(device, bytes);
  device.zero(p.data(), bytes);
  const double budget = quick ? 0.05 : 0.4;
  const double resident = time_collectively(world, device, budget, [&] { device.zero(p.data(), bytes); });
  const double released = time_collectively(world, device, budget, [&] {
    device.discard(p.data(), bytes);
    device.zero(p.data(), bytes);
  });
  // A release no slower than a resident write (within the timing's noise) costs a memory pass.
  return static_cast<double>(bytes) / std::max(released - resident, resident);
}

// A group of g consecutive world ranks for the collectives, on the run's communication backend.
std::unique_ptr<Communicator> group_of(HostComm host_world, int rank, int g, const Placement& placement, Device& device) {
  std::vector<int> members(static_cast<std::size_t>(g));
  for (int i = 0; i < g; ++i) members[static_cast<std::size_t>(i)] = rank / g * g + i;
  if (placement.nccl) return make_nccl_communicator("calibrate", host_world, rank / g, rank, members, true, nullptr, nullptr);
  return std::make_unique<MpiCommunicator>("calibrate", host_world, rank / g, rank, members, nullptr, nullptr, false, device, false);
}

// The five collectives at every group size dividing the world, over message sizes, through the
// communication layer (MPI or NCCL, on the device's buffers). `spans_nodes`: whether some group crosses
// a node boundary (then the samples describe the inter-node link).
std::vector<CommSample> measure_collectives(HostComm host_world, Communicator& world, const LaunchEnv& env, const Placement& placement,
                                            Device& device, bool quick, bool& spans_nodes) {
  const int rank = world.rank(), size = world.size();
  const std::vector<double> sizes = quick ? std::vector<double>{4096, 262144, 2097152}
                                          : std::vector<double>{1024, 8192, 65536, 524288, 4194304};
  std::vector<CommSample> samples;
  spans_nodes = false;
  std::vector<int> node_of_rank(static_cast<std::size_t>(size));  // host values, through the world communicator
  world.all_gather(&env.node_id, node_of_rank.data(), 1, DType::i32, {"calibrate: every rank's node"});
  for (int g = 2; g <= size; ++g) {
    if (size % g) continue;
    const std::unique_ptr<Communicator> group = group_of(host_world, rank, g, placement, device);
    for (int first = 0; first < size; first += g)  // groups are runs of g consecutive ranks
      spans_nodes = spans_nodes || std::any_of(node_of_rank.begin() + first, node_of_rank.begin() + first + g,
                                               [&](int node) { return node != node_of_rank[static_cast<std::size_t>(first)]; });
    const int me = group->rank(), next = (me + 1) % g, prev = (me + g - 1) % g;
    for (double bytes : sizes) {
      const std::size_t count = static_cast<std::size_t>(bytes / 4) / g * g;  // floats, divisible by the group
      Arena in(device, count * sizeof(float)), out(device, count * sizeof(float));
      fill(device, in.as<float>(), count, 1.0f);
      fill(device, out.as<float>(), count, 0.0f);  // all_reduce sums in place: zeros stay zeros
      const Blocks blocks = Blocks::packed(std::vector<std::size_t>(static_cast<std::size_t>(g), count / g));
      const double budget = quick ? 0.02 : 0.1;
      auto sample = [&](Collective op, const std::function<void()>& f) {
        samples.push_back({op, 4.0 * static_cast<double>(count), g, time_collectively(world, device, budget, f)});
      };
      const CommLabel label{"calibrate"};
      sample(Collective::all_reduce, [&] { group->all_reduce(out.data(), count, DType::f32, ReduceOp::sum, label); });
      sample(Collective::reduce_scatter, [&] { group->reduce_scatter(in.data(), out.data(), count / g, DType::f32, label); });
      sample(Collective::all_gather, [&] { group->all_gather(in.data(), out.data(), count / g, DType::f32, label); });
      sample(Collective::send_recv, [&] { group->exchange(in.data(), out.data(), count, DType::f32, next, prev, 7, label); });
      sample(Collective::all_to_all, [&] { group->all_to_all_v(in.data(), blocks, out.data(), blocks, DType::f32, label); });
    }
  }
  return samples;
}

}  // namespace

int run_calibrate(HostComm host_world, const CalibrateOptions& o) {
  if (o.out.empty()) throw UserError("dtrain calibrate needs --out FILE (where to write the cluster description)");
  const LaunchEnv env = detect_launch_env(host_world);
  const int rank = env.world_rank, size = env.world_size, nodes = env.num_nodes;
  // The run's device and communication backend, placed as training places them (a GPU per rank with
  // --device cuda); the world communicator moves host values.
  const Placement placement = place_ranks(host_world, o.device, CommBackend::automatic, Precision::fp32, env);
  Device& device = device_for(placement.backend);
  std::vector<int> everyone(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) everyone[static_cast<std::size_t>(r)] = r;
  MpiCommunicator world_group("world", host_world, 0, rank, everyone, nullptr, nullptr, false, host_device(), false);
  Communicator& world = world_group;
  const ComputeBudget budget = measure_compute(host_world, env.node, 0, 0.0, nullptr);  // BLAS threads as training sets them

  ClusterSpec c;
  c.device = o.device;
  c.nodes = nodes;
  c.devices_per_node = size / nodes;
  const std::vector<GemmSample> gemms = measure_gemms<float>(world, device, o.quick);
  c.peak_fp32 = peak_rate(gemms);
  if (device.is_host()) {
    c.peak_bf16 = c.peak_fp32;  // bf16 runs compute in fp32 on the host
    c.gemm_efficiency = efficiency_table(gemms, c.peak_fp32);
    c.gemm_efficiency_by_width = efficiency_by_width(gemms, c.peak_fp32);
  } else {
    // A GPU trains in bf16: its tensor-core GEMMs give the bf16 peak and the efficiency table.
    const std::vector<GemmSample> half = measure_gemms<bf16>(world, device, o.quick);
    c.peak_bf16 = peak_rate(half);
    c.gemm_efficiency = efficiency_table(half, c.peak_bf16);
    c.gemm_efficiency_by_width = efficiency_by_width(half, c.peak_bf16);
  }
  c.memory_bandwidth = measure_memory_bandwidth(world, device, o.quick);
  c.elementwise_bandwidth = measure_elementwise_bandwidth(world, device, o.quick);
  c.release_bandwidth = measure_release_bandwidth(world, device, o.quick);
  if (!device.is_host()) std::tie(c.host_link_bandwidth, c.host_memory_bandwidth) = measure_host_rates(world, device, o.quick);
  c.attention_score_seconds = device.is_host() ? measure_attention_score_seconds<float>(world, device, o.quick, c, c.peak_fp32)
                                               : measure_attention_score_seconds<bf16>(world, device, o.quick, c, c.peak_bf16);
  // The least memory a rank has (the node's over its ranks, or the rank's share of its GPU): the
  // maximum of its negation.
  double least = -(device.is_host() ? static_cast<double>(node_memory_bytes()) / env.local_size : placement.gpu_memory_share);
  world.all_reduce(&least, 1, DType::f64, ReduceOp::max, {"calibrate: memory per rank"});
  c.memory = -least;
  bool spans_nodes = false;
  const std::vector<CommSample> comm = measure_collectives(host_world, world, env, placement, device, o.quick, spans_nodes);
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
  const std::string per_rank = device.is_host() ? std::to_string(budget.threads) + " BLAS thread(s) each" : "a GPU each";
  c.name = o.name.empty() ? std::string(host) + " (" + std::to_string(size) + " ranks, " + per_rank + ", dtrain calibrate)" : o.name;
  collective_check(host_world, [&] {  // rank 0 writes; its error ends every rank
    if (rank != 0) return;
    std::ostringstream out;
    out << "# " << o.out << ": measured by `mpirun -np " << size << " dtrain calibrate" << (o.quick ? " --quick" : "")
        << (device.is_host() ? "" : " --device cuda") << "` on "
        << host << "\n# " << links << "\n" << format_cluster(c);
    write_file_atomically(o.out, out.str(), "--out");
  });
  if (rank != 0) return 0;
  std::printf("dtrain calibrate: %d rank(s) on %d node(s), %s, %d BLAS thread(s) per rank\n", size, nodes, placement.description.c_str(),
              budget.threads);
  std::printf("  GEMM peak %.2f GFLOP/s per rank in fp32, %.2f in bf16; efficiency by FLOPs:", c.peak_fp32 / 1e9, c.peak_bf16 / 1e9);
  for (const auto& [f, e] : c.gemm_efficiency) std::printf(" %.3g:%.2f", f, e);
  std::printf("\n  by width (the weight's narrower dimension):");
  for (const auto& [w, curve] : c.gemm_efficiency_by_width) {
    std::printf("\n    %5.0f:", w);
    for (const auto& [f, e] : curve) std::printf(" %.3g:%.2f", f, e);
  }
  std::printf("\n  memory bandwidth %.2f GB/s per rank, %.2f GB per rank; elementwise kernels %.2f GB/s; memory released and "
              "taken again at %.2f GB/s; attention beyond its GEMMs %.3f ns per causal score\n",
              c.memory_bandwidth / 1e9, c.memory / 1e9, c.elementwise_bandwidth / 1e9, c.release_bandwidth / 1e9,
              c.attention_score_seconds * 1e9);
  if (c.host_link_bandwidth > 0)
    std::printf("  to and from host memory %.2f GB/s per rank; host memory %.2f GB/s per rank (system.offload_optimizer)\n",
                c.host_link_bandwidth / 1e9, c.host_memory_bandwidth / 1e9);
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
