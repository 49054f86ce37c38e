// ParallelState: communicators from the pure RankLayout, one split per axis of the chosen backend, except
// for groups of one rank, which need none (SoloCommunicator).
#include "comm/parallel_state.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "comm/mpi_communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "comm/solo_communicator.hpp"
#include "common/error.hpp"

namespace dtrain {

ParallelState::ParallelState(HostComm world, const RankLayout& layout, const CommOptions& options, Watchdog* watchdog, Trace* trace)
    : layout_(layout), world_comm_(world), pipeline_nccl_(options.nccl && options.nccl_pipeline), watchdog_(watchdog), trace_(trace) {
  world_rank_ = world.rank();
  const int size = world.size();
  if (size != layout_.world_size())
    fatal("layout needs " + std::to_string(layout_.world_size()) + " ranks but the job has " + std::to_string(size));
  coords_ = layout_.coords_of(world_rank_);
  Device& buffers = options.device ? *options.device : host_device();
  if (options.nccl && buffers.is_host()) fatal("internal error: NCCL communicators over host memory");
  // A group of the parallel code: NCCL or MPI, over the device's buffers; a group of one rank is solo.
  // Splits are collective over world: every group of a kind (an axis, ep, edp, embedding, dp-cp) has
  // the same size on every rank, so either every rank splits for it or none does.
  auto make = [&](const char* name, int color, int key, std::vector<int> members) -> std::unique_ptr<Communicator> {
    if (members.size() == 1) return std::make_unique<SoloCommunicator>(name, world_rank_, buffers);
    ++split_communicators_;
    const bool pipeline = std::string(name) == axis_name(Axis::pp);
    if (options.nccl && (!pipeline || options.nccl_pipeline))
      return make_nccl_communicator(name, world, color, key, std::move(members), pipeline, watchdog, trace);
    return std::make_unique<MpiCommunicator>(name, world, color, key, std::move(members), watchdog, trace, options.synchronous_sends,
                                             buffers, options.stage_through_host);
  };
  for (Axis a : kAllAxes)
    groups_[static_cast<int>(a)] = make(axis_name(a), layout_.group_index(a, world_rank_), coords_[a], layout_.group_of(a, world_rank_));
  // Sub-groups of the grid: the colour is the group's lowest rank, the key the rank's place in it.
  auto make_group = [&](const char* name, std::vector<int> members, int position) {
    const int color = *std::min_element(members.begin(), members.end());
    return make(name, color, position, std::move(members));
  };
  // Expert parallelism. With ep = 1 a rank is its own EP group (solo) and the expert-data-parallel
  // group is the replicas group (replicas()).
  ep_ = make_group("ep", layout_.ep_group_of(world_rank_), layout_.sizes().ep_rank(coords_));
  if (layout_.sizes().ep > 1) edp_ = make_group("edp", layout_.edp_group_of(world_rank_), layout_.sizes().edp_rank(coords_));
  const auto emb = layout_.embedding_group_of(world_rank_);
  if (emb.empty()) {
    MPI_Comm none = MPI_COMM_NULL;  // the split is collective: ranks outside every group take part too
    MPI_CHECK(MPI_Comm_split(world.mpi(), MPI_UNDEFINED, 0, &none));
  } else {
    embedding_ = make("embedding", layout_.group_index(Axis::pp, world_rank_), coords_.pp, emb);
  }
  if (layout_.sizes().cp > 1)
    replicas_ = make("dp-cp", layout_.replica_group_index(world_rank_), layout_.replica_index(world_rank_),
                     layout_.replica_group_of(world_rank_));
  std::vector<int> everyone(static_cast<std::size_t>(size));
  std::iota(everyone.begin(), everyone.end(), 0);
  ++split_communicators_;
  world_ = std::make_unique<MpiCommunicator>("world", world, 0, world_rank_, everyone, watchdog, trace, options.synchronous_sends,
                                             host_device(), false);
}

ParallelState::~ParallelState() = default;

}  // namespace dtrain
