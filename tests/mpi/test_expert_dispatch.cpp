// The all-to-all expert dispatch over an EP group of every rank: rows reach the ranks of their
// experts in the expert side's order (local expert, then source rank, then the source's order), and
// the combine brings every row back to its place. Uneven counts with empty blocks, rows of 256 KB
// (blocks above 1 MB), fp32 and bf16, on the buffers and staged through pinned memory, synchronous sends.
#include <catch2/catch.hpp>
#include <mpi.h>

#include "comm/parallel_state.hpp"
#include "parallel/all_to_all_dispatch.hpp"

using namespace dtrain;

namespace {

constexpr int kLocal = 2;  // experts per rank

long rows_for(int source, int expert) { return (source * 3 + expert * 5) % 4; }  // 0..3: some empty
float row_value(int source, int expert, long k, int j) { return static_cast<float>(source * 16 + expert) + (k * 7 + j % 5) / 64.0f; }

template <typename T>
void check_dispatch(Communicator& ep, int width) {
  const int n = ep.size(), me = ep.rank(), E = kLocal * n;
  std::vector<long> sent(E);
  std::vector<T> tokens;
  for (int e = 0; e < E; ++e) {
    sent[e] = rows_for(me, e);
    for (long k = 0; k < sent[e]; ++k)
      for (int j = 0; j < width; ++j) tokens.push_back(from_float<T>(row_value(me, e, k, j)));
  }
  AllToAllExpertDispatch dispatch(ep, host_device());
  const ExpertLayout layout = dispatch.plan(sent);
  std::vector<T> want;
  for (int l = 0; l < kLocal; ++l)
    for (int s = 0; s < n; ++s) {
      const int e = me * kLocal + l;
      CHECK(layout.received[s * kLocal + l] == rows_for(s, e));
      for (long k = 0; k < rows_for(s, e); ++k)
        for (int j = 0; j < width; ++j) want.push_back(from_float<T>(row_value(s, e, k, j)));
    }
  REQUIRE(static_cast<std::size_t>(layout.expert_rows() * width) == want.size());
  std::vector<T> experts(want.size() + 1), back(tokens.size() + 1);
  const T* got = static_cast<const T*>(dispatch.to_experts(layout, tokens.data(), experts.data(), width, dtype_of<T>()));
  bool same = true;
  for (std::size_t i = 0; i < want.size(); ++i) same = same && to_float(got[i]) == to_float(want[i]);
  CHECK(same);
  const T* home = static_cast<const T*>(dispatch.from_experts(layout, got, back.data(), width, dtype_of<T>()));
  same = true;
  for (std::size_t i = 0; i < tokens.size(); ++i) same = same && to_float(home[i]) == to_float(tokens[i]);
  CHECK(same);
}

}  // namespace

TEST_CASE("all-to-all expert dispatch moves rows to their experts' ranks and back", "[mpi][comm][moe]") {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ParallelLayout sizes;
  sizes.dp = world;
  sizes.ep = world;
  const bool staged = GENERATE(false, true);
  INFO((staged ? "staged through pinned buffers" : "on the buffers"));
  CommOptions options;
  options.synchronous_sends = true;
  options.stage_through_host = staged;
  const ParallelState ps(MPI_COMM_WORLD, RankLayout(sizes, "tp-cp-dp-pp"), options);
  REQUIRE(ps.ep().size() == world);
  check_dispatch<float>(ps.ep(), 65536);  // 256 KB rows: blocks of up to 6 rows
  check_dispatch<bf16>(ps.ep(), 3);
}
