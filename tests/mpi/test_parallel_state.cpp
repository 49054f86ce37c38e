// ParallelState and the MPI backend of the communication layer at the job's rank count: communicators
// agree with the pure layout, and every operation of the layer moves the right values (sums over each
// group equal the sums of the world ranks the layout puts in it; in-place reduce-scatter and
// all-gather land in each rank's own block; point-to-point with synchronous sends).
#include <catch2/catch.hpp>
#include <mpi.h>

#include <numeric>

#include "comm/parallel_state.hpp"
#include "runtime/launch_env.hpp"

using namespace dtrain;

namespace {

std::vector<ParallelSizes> layouts_for(int world) {
  std::vector<ParallelSizes> out;
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2) {
      ParallelSizes s;
      s.tp = tp;
      s.pp = pp;
      s.dp = world / (tp * pp);
      out.push_back(s);
    }
  return out;
}

}  // namespace

TEST_CASE("communicators match the layout for every power-of-two layout", "[mpi][parallel_state]") {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (const auto& sizes : layouts_for(world)) {
    for (const char* order : {"tp-cp-dp-pp", "tp-cp-pp-dp"}) {
      const RankLayout layout(sizes, order);
      const ParallelState ps(MPI_COMM_WORLD, layout);
      CHECK(ps.coords() == layout.coords_of(rank));
      for (Axis a : kAllAxes) {
        Communicator& g = ps.group(a);
        CHECK(g.size() == sizes[a]);
        CHECK(g.rank() == ps.coords()[a]);
        const auto expected = layout.group_of(a, rank);
        CHECK(g.world_ranks() == expected);
        int sum = rank;
        g.all_reduce(&sum, 1, DType::i32, ReduceOp::sum, {"test"});
        CHECK(sum == std::accumulate(expected.begin(), expected.end(), 0));
      }
      const auto emb = layout.embedding_group_of(rank);
      CHECK((ps.embedding() != nullptr) == !emb.empty());
      if (ps.embedding()) {
        int sum = rank;
        ps.embedding()->all_reduce(&sum, 1, DType::i32, ReduceOp::sum, {"test"});
        CHECK(sum == std::accumulate(emb.begin(), emb.end(), 0));
      }
      CHECK(ps.world().size() == world);
    }
  }
}

TEST_CASE("every operation of the MPI backend moves the right values", "[mpi][comm]") {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ParallelSizes all_dp;
  all_dp.dp = world;
  const ParallelState ps(MPI_COMM_WORLD, RankLayout(all_dp, "tp-cp-dp-pp"), CommOptions{/*synchronous_sends=*/true});
  Communicator& g = ps.dp();
  const std::size_t n = 300000;  // 1.2 MB per block: above every eager limit
  const std::size_t count = n * static_cast<std::size_t>(world);
  // Value of element i as contributed by rank r.
  auto value = [](int r, std::size_t i) { return static_cast<float>((r + 1) * 1000 + static_cast<int>(i % 997)); };
  std::vector<float> buf(count);
  for (Completion c : {Completion::now, Completion::later}) {
    INFO((c == Completion::now ? "blocking" : "non-blocking"));
    for (std::size_t i = 0; i < count; ++i) buf[i] = value(rank, i);
    g.reduce_scatter_in_place(buf.data(), n, DType::f32, {"test"}, c).wait();
    float want_sum_of_ranks = 0.0f;
    for (int r = 0; r < world; ++r) want_sum_of_ranks += static_cast<float>((r + 1) * 1000);
    bool ok = true;
    for (std::size_t i = rank * n; i < (rank + 1) * n; ++i)
      ok = ok && buf[i] == want_sum_of_ranks + static_cast<float>(world * static_cast<int>(i % 997));
    CHECK(ok);  // this rank's block holds the sum, in place
    for (std::size_t i = rank * n; i < (rank + 1) * n; ++i) buf[i] = value(rank, i);
    g.all_gather_in_place(buf.data(), n, DType::f32, {"test"}, c).wait();
    ok = true;
    for (int r = 0; r < world; ++r)
      for (std::size_t i = r * n; i < (r + 1) * n; ++i) ok = ok && buf[i] == value(r, i);
    CHECK(ok);  // every block is its owner's
    std::vector<double> x(n, rank + 1.0);
    g.all_reduce(x.data(), n, DType::f64, ReduceOp::sum, {"test"}, c).wait();
    CHECK(x[n - 1] == world * (world + 1) / 2.0);
  }
  // A ring of synchronous sends: every send is started before any receive, so this completes only
  // because sends never block the sender.
  std::vector<float> out(n, static_cast<float>(rank)), in(n, -1.0f);
  CommRequest sent = g.send(out.data(), n, DType::f32, (rank + 1) % world, 7, {"test send"});
  g.recv(in.data(), n, DType::f32, (rank + world - 1) % world, 7, {"test recv"});
  sent.wait();
  CHECK(in[n / 2] == static_cast<float>((rank + world - 1) % world));
  float root_value = rank == 0 ? 42.0f : 0.0f;
  g.broadcast(&root_value, 1, DType::f32, 0, {"test"});
  CHECK(root_value == 42.0f);
  float mine = 1.0f, total = 0.0f;
  g.reduce(&mine, &total, 1, DType::f32, 0, {"test"});
  if (rank == 0) CHECK(total == static_cast<float>(world));
}

TEST_CASE("launch environment agrees across ranks", "[mpi][launch]") {
  const LaunchEnv e = detect_launch_env(MPI_COMM_WORLD);
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  CHECK(e.world_size == world);
  CHECK(e.local_rank >= 0);
  CHECK(e.local_rank < e.local_size);
  CHECK(e.node_id >= 0);
  CHECK(e.node_id < e.num_nodes);
  int local_sum = 0, total = 0;
  local_sum = e.local_rank == 0 ? 1 : 0;  // one local rank 0 per node
  MPI_Allreduce(&local_sum, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(total == e.num_nodes);
  CHECK(gather_node_names(MPI_COMM_WORLD, e).size() == static_cast<std::size_t>(world));
}
