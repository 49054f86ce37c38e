// The parallel state of a rank: its coordinates on the grid and one CommGroup per axis plus the
// embedding group. Built once from (world communicator, RankLayout), passed by const reference;
// no globals. Destroy it before MPI_Finalize.
#pragma once
#include <mpi.h>

#include <string>

#include "runtime/comm_group.hpp"
#include "plan/rank_layout.hpp"
#include "runtime/trace.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

class ParallelState {
 public:
  // Collective over `world`: one MPI_Comm_split per axis and one for the embedding group.
  // watchdog (optional) is told about every communication made through this state's users.
  ParallelState(MPI_Comm world, const RankLayout& layout, Watchdog* watchdog = nullptr, Trace* trace = nullptr);

  const RankLayout& layout() const { return layout_; }
  MPI_Comm world() const { return world_; }
  Watchdog* watchdog() const { return watchdog_; }
  Trace* trace() const { return trace_; }
  int world_rank() const { return world_rank_; }
  const Coords& coords() const { return coords_; }
  const CommGroup& group(Axis a) const { return groups_[static_cast<int>(a)]; }
  const CommGroup& tp() const { return group(Axis::tp); }
  const CommGroup& cp() const { return group(Axis::cp); }
  const CommGroup& dp() const { return group(Axis::dp); }
  const CommGroup& pp() const { return group(Axis::pp); }
  const CommGroup& embedding() const { return embedding_; }

  bool is_first_stage() const { return coords_.pp == 0; }
  bool is_last_stage() const { return coords_.pp == layout_.sizes().pp - 1; }
  // World ranks of the neighbouring pipeline stages; -1 at the ends.
  int prev_stage_rank() const;
  int next_stage_rank() const;

  // Mirrors every group with an NCCL communicator (GPU runs).
  void init_nccl();


 private:
  RankLayout layout_;
  MPI_Comm world_;
  Watchdog* watchdog_;
  Trace* trace_;
  int world_rank_ = 0;
  Coords coords_;
  CommGroup groups_[4];
  CommGroup embedding_;
};

}  // namespace dtrain
