// ParallelState and the MPI backend of the communication layer at the job's rank count: communicators
// agree with the pure layout, a group of one rank is solo (no communicator split for it), and every
// operation of the MPI backend moves the right values (sums over each group equal the sums of the world
// ranks the layout puts in it; in-place reduce-scatter and all-gather land in each rank's own block;
// point-to-point with synchronous sends).
#include <catch2/catch.hpp>
#include <mpi.h>

#include <numeric>
#include <type_traits>

#include "comm/mpi_communicator.hpp"
#include "comm/parallel_state.hpp"
#include "comm/solo_communicator.hpp"
#include "launch/launch_env.hpp"
#include "support/mpi_over_world.hpp"

using namespace dtrain;

namespace {

using testing::mpi_over_world;

std::vector<ParallelLayout> layouts_for(int world) {
  std::vector<ParallelLayout> out;
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2) {
      ParallelLayout s;
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

TEST_CASE("EP and expert-data-parallel communicators match the layout", "[mpi][parallel_state][ep]") {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (auto sizes : layouts_for(world))
    for (int ep = 1; ep <= sizes.dp; ep *= 2) {
      sizes.ep = ep;
      const RankLayout layout(sizes, "tp-cp-dp-pp");
      const ParallelState ps(MPI_COMM_WORLD, layout);
      for (Communicator* g : {&ps.ep(), &ps.edp()}) {
        const bool is_ep = g == &ps.ep();
        const auto expected = is_ep ? layout.ep_group_of(rank) : layout.edp_group_of(rank);
        CHECK(g->world_ranks() == expected);
        CHECK(g->rank() == (is_ep ? layout.sizes().ep_rank(ps.coords()) : layout.sizes().edp_rank(ps.coords())));
        int sum = rank;
        g->all_reduce(&sum, 1, DType::i32, ReduceOp::sum, {"test"});
        CHECK(sum == std::accumulate(expected.begin(), expected.end(), 0));
      }
    }
}

TEST_CASE("a group of one rank is solo and no communicator is split for it", "[mpi][parallel_state]") {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto is_solo = [](const Communicator& g) { return dynamic_cast<const SoloCommunicator*>(&g) != nullptr; };
  for (auto sizes : layouts_for(world))
    for (int ep = 1; ep <= sizes.dp; ep *= 2) {
      sizes.ep = ep;
      const RankLayout layout(sizes, "tp-cp-dp-pp");
      const ParallelState ps(MPI_COMM_WORLD, layout);
      INFO("tp " << sizes.tp << " pp " << sizes.pp << " dp " << sizes.dp << " ep " << sizes.ep);
      std::vector<const Communicator*> groups{&ps.tp(), &ps.cp(), &ps.dp(), &ps.pp(), &ps.ep()};
      if (ep > 1) groups.push_back(&ps.edp());
      if (ps.embedding()) groups.push_back(ps.embedding());
      int split = 1;  // the world
      for (const Communicator* g : groups) {
        INFO(g->name());
        CHECK(is_solo(*g) == (g->size() == 1));
        split += g->size() > 1 ? 1 : 0;
      }
      CHECK(ps.split_communicators() == split);
      CHECK(!is_solo(ps.world()));
    }
  // By hand: one rank holds every group alone; at two ranks, tp = 2 splits the tp group alone and pp = 2
  // the pipeline and the embedding group (first and last stage).
  auto splits = [](int tp, int pp, int dp) {
    ParallelLayout s;
    s.tp = tp, s.pp = pp, s.dp = dp;
    return ParallelState(MPI_COMM_WORLD, RankLayout(s, "tp-cp-dp-pp")).split_communicators();
  };
  if (world == 1) CHECK(splits(1, 1, 1) == 1);
  if (world == 2) {
    CHECK(splits(2, 1, 1) == 2);
    CHECK(splits(1, 2, 1) == 3);
    CHECK(splits(1, 1, 2) == 2);
  }
}

TEST_CASE("every operation of the MPI backend moves the right values", "[mpi][comm]") {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Directly on the buffers, and staged through pinned host copies as for GPU memory.
  const bool staged = GENERATE(false, true);
  INFO((staged ? "staged through pinned buffers" : "on the buffers"));
  CommOptions options;
  options.synchronous_sends = true;
  options.stage_through_host = staged;
  const auto group = mpi_over_world(options);
  Communicator& g = *group;
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
  // Out of place: gather every rank's block; reduce-scatter the sum of everyone's (world x n) buffer.
  std::vector<float> block(n), all(count, -1.0f);
  for (std::size_t i = 0; i < n; ++i) block[i] = value(rank, i);
  g.all_gather(block.data(), all.data(), n, DType::f32, {"test"});
  bool gathered = true;
  for (int r = 0; r < world; ++r)
    for (std::size_t i = 0; i < n; ++i) gathered = gathered && all[r * n + i] == value(r, i);
  CHECK(gathered);
  for (std::size_t i = 0; i < count; ++i) all[i] = value(rank, i);
  g.reduce_scatter(all.data(), block.data(), n, DType::f32, {"test"});
  float ranks_total = 0.0f;
  for (int r = 0; r < world; ++r) ranks_total += static_cast<float>((r + 1) * 1000);
  bool scattered = true;
  for (std::size_t i = 0; i < n; ++i)
    scattered = scattered && block[i] == ranks_total + static_cast<float>(world * static_cast<int>((rank * n + i) % 997));
  CHECK(scattered);
}

TEMPLATE_TEST_CASE("16-bit sums and maxima of the MPI backend round once per combination", "[mpi][comm][bf16]", bf16, fp16) {
  using S = TestType;
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto group = mpi_over_world();
  Communicator& g = *group;
  const DType type = dtype_of<S>();
  // Values that both types hold exactly, with exact sums: rank r contributes (r + 1) * 0.5 + i / 8.
  const std::size_t n = 600000;  // 1.2 MB
  std::vector<S> x(n), m(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = from_float<S>(static_cast<float>(rank + 1) * 0.5f + static_cast<float>(i % 8) / 8.0f);
    m[i] = from_float<S>(static_cast<float>((rank * 7 + static_cast<int>(i)) % world));
  }
  g.all_reduce(x.data(), n, type, ReduceOp::sum, {"test"});
  g.all_reduce(m.data(), n, type, ReduceOp::max, {"test"});
  const float ranks = 0.5f * world * (world + 1) / 2.0f;
  bool sums = true, maxima = true;
  for (std::size_t i = 0; i < n; ++i) {
    sums = sums && to_float(x[i]) == ranks + static_cast<float>(world * static_cast<int>(i % 8)) / 8.0f;
    maxima = maxima && to_float(m[i]) == static_cast<float>(world - 1);
  }
  CHECK(sums);
  CHECK(maxima);
  // A sum the type cannot hold is rounded to nearest: above `big` (2^8 for bf16's 8 significant bits,
  // 2^11 for fp16's 11) the steps are 2, so big + 1.5 (+ 0 ...) -> big + 2 with two ranks (truncation
  // would give big). fp16 must not be reduced as bf16 bits: that would read other values altogether.
  const float big = std::is_same_v<S, bf16> ? 256.0f : 2048.0f;
  S y = from_float<S>(rank == 0 ? big : (rank == 1 ? 1.5f : 0.0f));
  g.all_reduce(&y, 1, type, ReduceOp::sum, {"test"});
  if (world >= 2) CHECK(to_float(y) == big + 2.0f);
}

namespace {

// What rank s sends rank r in the all-to-all-v test: uneven, some blocks empty, most above 1 MB of fp32.
std::size_t a2a_count(int s, int r) { return (s + 2 * r + 1) % 3 == 0 ? 0 : static_cast<std::size_t>((s + 2 * r + 1) % 3) * 300000 + r; }
float a2a_value(int s, int r, std::size_t i) { return static_cast<float>(s * 1000 + r * 100 + static_cast<int>(i % 97)); }

template <typename T>
void check_all_to_all_v(Communicator& g) {
  const int world = g.size(), me = g.rank();
  const std::size_t n = static_cast<std::size_t>(world);
  // The receiver learns its counts (and a second value per peer) from the senders.
  std::vector<std::size_t> out_counts(2 * n);
  for (int r = 0; r < world; ++r) {
    out_counts[2 * r] = a2a_count(me, r);
    out_counts[2 * r + 1] = static_cast<std::size_t>(me * 10 + r);
  }
  const std::vector<std::size_t> in_counts = g.exchange_counts(out_counts, {"test counts"});
  bool counts_ok = in_counts.size() == 2 * n;
  for (int s = 0; s < world && counts_ok; ++s)
    counts_ok = in_counts[2 * s] == a2a_count(s, me) && in_counts[2 * s + 1] == static_cast<std::size_t>(s * 10 + me);
  REQUIRE(counts_ok);
  // Send blocks in reverse rank order (displacements, not packing, say where they are); receive blocks
  // in rank order with 5 elements of sentinel between them, which must stay untouched.
  Blocks send, recv;
  std::size_t at = 0;
  send.counts.resize(n);
  send.displs.resize(n);
  for (int r = world - 1; r >= 0; --r) {
    send.counts[r] = a2a_count(me, r);
    send.displs[r] = at;
    at += send.counts[r];
  }
  std::vector<T> out(at);
  for (int r = 0; r < world; ++r)
    for (std::size_t i = 0; i < send.counts[r]; ++i) out[send.displs[r] + i] = from_float<T>(a2a_value(me, r, i));
  at = 5;
  for (int s = 0; s < world; ++s) {
    recv.counts.push_back(in_counts[2 * s]);
    recv.displs.push_back(at);
    at += in_counts[2 * s] + 5;
  }
  const float sentinel = -7.0f;
  std::vector<T> in(at, from_float<T>(sentinel));
  g.all_to_all_v(out.data(), send, in.data(), recv, dtype_of<T>(), {"test all_to_all_v"});
  bool ok = true;
  std::size_t pos = 0;
  for (int s = 0; s < world; ++s) {
    for (; pos < recv.displs[s]; ++pos) ok = ok && to_float(in[pos]) == sentinel;
    for (std::size_t i = 0; i < recv.counts[s]; ++i, ++pos) ok = ok && to_float(in[pos]) == to_float(from_float<T>(a2a_value(s, me, i)));
  }
  for (; pos < in.size(); ++pos) ok = ok && to_float(in[pos]) == sentinel;
  CHECK(ok);
}

}  // namespace

TEST_CASE("all_to_all_v moves uneven blocks, empty ones included, after the counts exchange", "[mpi][comm]") {
  const bool staged = GENERATE(false, true);
  INFO((staged ? "staged through pinned buffers" : "on the buffers"));
  CommOptions options;
  options.synchronous_sends = true;  // a collective: nothing may depend on buffering either way
  options.stage_through_host = staged;
  const auto group = mpi_over_world(options);
  check_all_to_all_v<float>(*group);
  check_all_to_all_v<bf16>(*group);
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
