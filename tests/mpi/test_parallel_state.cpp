// ParallelState at the job's rank count: communicators agree with the pure layout, and a sum over each
// group's communicator equals the sum of the world ranks the layout puts in it.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <numeric>

#include "runtime/launch_env.hpp"
#include "runtime/parallel_state.hpp"

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
        const CommGroup& g = ps.group(a);
        REQUIRE(g.member());
        CHECK(g.size() == sizes[a]);
        CHECK(g.rank() == ps.coords()[a]);
        const auto expected = layout.group_of(a, rank);
        CHECK(g.world_ranks() == expected);
        int sum = 0;
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, g.comm());
        CHECK(sum == std::accumulate(expected.begin(), expected.end(), 0));
      }
      const auto emb = layout.embedding_group_of(rank);
      CHECK(ps.embedding().member() == !emb.empty());
      if (ps.embedding().member()) {
        int sum = 0;
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ps.embedding().comm());
        CHECK(sum == std::accumulate(emb.begin(), emb.end(), 0));
      }
      CHECK((ps.prev_stage_rank() == -1) == ps.is_first_stage());
      CHECK((ps.next_stage_rank() == -1) == ps.is_last_stage());
    }
  }
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
