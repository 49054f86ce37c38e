// ParallelState: communicators from the pure RankLayout, one split per axis.
#include "comm/parallel_state.hpp"

#include <numeric>

#include "comm/mpi_communicator.hpp"
#include "common/error.hpp"

namespace dtrain {

ParallelState::ParallelState(MPI_Comm world, const RankLayout& layout, const CommOptions& options, Watchdog* watchdog, Trace* trace)
    : layout_(layout), world_comm_(world), watchdog_(watchdog), trace_(trace) {
  int size = 0;
  MPI_CHECK(MPI_Comm_rank(world, &world_rank_));
  MPI_CHECK(MPI_Comm_size(world, &size));
  if (size != layout_.world_size())
    fatal("layout needs " + std::to_string(layout_.world_size()) + " ranks but the job has " + std::to_string(size));
  coords_ = layout_.coords_of(world_rank_);
  auto make = [&](const char* name, int color, int key, std::vector<int> members) {
    return std::make_unique<MpiCommunicator>(name, world, color, key, std::move(members), watchdog, trace, options.synchronous_sends);
  };
  for (Axis a : kAllAxes)
    groups_[static_cast<int>(a)] = make(axis_name(a), layout_.group_index(a, world_rank_), coords_[a], layout_.group_of(a, world_rank_));
  const auto emb = layout_.embedding_group_of(world_rank_);
  if (emb.empty()) {
    MPI_Comm none = MPI_COMM_NULL;  // the split is collective: ranks outside every group take part too
    MPI_CHECK(MPI_Comm_split(world, MPI_UNDEFINED, 0, &none));
  } else {
    embedding_ = make("embedding", layout_.group_index(Axis::pp, world_rank_), coords_.pp, emb);
  }
  std::vector<int> everyone(static_cast<std::size_t>(size));
  std::iota(everyone.begin(), everyone.end(), 0);
  world_ = make("world", 0, world_rank_, everyone);
}

ParallelState::~ParallelState() = default;

}  // namespace dtrain
