// CommGroup: MPI_Comm_split per group, NCCL mirror on GPU builds, release in reverse order.
#include "runtime/comm_group.hpp"

#include "common/error.hpp"
#include "dtrain_config.hpp"
#include "runtime/nccl_comm.hpp"

namespace dtrain {

CommGroup::CommGroup(MPI_Comm parent, int color, int key, std::vector<int> world_ranks)
    : world_ranks_(std::move(world_ranks)) {
  MPI_CHECK(MPI_Comm_split(parent, color, key, &comm_));
  if (comm_ != MPI_COMM_NULL) {
    MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(MPI_Comm_size(comm_, &size_));
    if (size_ != static_cast<int>(world_ranks_.size()))
      fatal("communicator split gave " + std::to_string(size_) + " ranks, layout expects " +
            std::to_string(world_ranks_.size()));
  } else {
    world_ranks_.clear();
  }
}

CommGroup::CommGroup(CommGroup&& o) noexcept
    : comm_(o.comm_), rank_(o.rank_), size_(o.size_), world_ranks_(std::move(o.world_ranks_)), nccl_(std::move(o.nccl_)) {
  o.comm_ = MPI_COMM_NULL;
}

CommGroup& CommGroup::operator=(CommGroup&& o) noexcept {
  if (this != &o) {
    release();
    comm_ = o.comm_;
    rank_ = o.rank_;
    size_ = o.size_;
    world_ranks_ = std::move(o.world_ranks_);
    nccl_ = std::move(o.nccl_);
    o.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

CommGroup::CommGroup() = default;
CommGroup::~CommGroup() { release(); }

void CommGroup::release() {
  nccl_.reset();  // NCCL before the MPI communicator it was bootstrapped from
  if (comm_ != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }
}

void CommGroup::init_nccl() {
  if (!member() || nccl_) return;
  nccl_ = std::make_unique<NcclComm>(comm_);
}

}  // namespace dtrain
