// One communication group (a TP, CP, DP, PP or embedding group): its MPI communicator and, on GPU
// runs, the NCCL communicator that mirrors it. Move-only; frees NCCL before MPI.
#pragma once
#include <mpi.h>

#include <memory>
#include <vector>

namespace dtrain {

class NcclComm;

class CommGroup {
 public:
  CommGroup();  // "not a member": the rank is outside every group of this kind
  // Collective over `parent`: ranks with the same colour form a group, ordered by key.
  // A rank passing MPI_UNDEFINED as colour gets a non-member group.
  CommGroup(MPI_Comm parent, int color, int key, std::vector<int> world_ranks);
  CommGroup(CommGroup&& other) noexcept;
  CommGroup& operator=(CommGroup&& other) noexcept;
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;
  ~CommGroup();

  bool member() const { return comm_ != MPI_COMM_NULL; }
  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  // GPU builds: creates the NCCL communicator (unique id broadcast over this group's MPI comm).
  void init_nccl();
  NcclComm* nccl() const { return nccl_.get(); }

 private:
  void release();
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = -1;
  int size_ = 0;
  std::vector<int> world_ranks_;
  std::unique_ptr<NcclComm> nccl_;
};

}  // namespace dtrain
