// ParallelState: communicators from the pure RankLayout, one split per axis.
#include "runtime/parallel_state.hpp"

#include "common/error.hpp"

namespace dtrain {

ParallelState::ParallelState(MPI_Comm world, const RankLayout& layout, Watchdog* watchdog, Trace* trace)
    : layout_(layout), world_(world), watchdog_(watchdog), trace_(trace) {
  int size = 0;
  MPI_CHECK(MPI_Comm_rank(world, &world_rank_));
  MPI_CHECK(MPI_Comm_size(world, &size));
  if (size != layout_.world_size())
    fatal("layout needs " + std::to_string(layout_.world_size()) + " ranks but the job has " + std::to_string(size));
  coords_ = layout_.coords_of(world_rank_);
  for (Axis a : kAllAxes) {
    groups_[static_cast<int>(a)] =
        CommGroup(world, layout_.group_index(a, world_rank_), coords_[a], layout_.group_of(a, world_rank_));
  }
  const auto emb = layout_.embedding_group_of(world_rank_);
  const int color = emb.empty() ? MPI_UNDEFINED : layout_.group_index(Axis::pp, world_rank_);
  embedding_ = CommGroup(world, color, coords_.pp, emb);
}

int ParallelState::prev_stage_rank() const {
  return is_first_stage() ? -1 : pp().world_ranks()[coords_.pp - 1];
}

int ParallelState::next_stage_rank() const {
  return is_last_stage() ? -1 : pp().world_ranks()[coords_.pp + 1];
}

void ParallelState::init_nccl() {
  for (auto& g : groups_) g.init_nccl();
  embedding_.init_nccl();
}

}  // namespace dtrain
