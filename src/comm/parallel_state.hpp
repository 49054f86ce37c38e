// The parallel state of a rank: its coordinates on the grid and one communicator per axis (tp, cp,
// dp, pp), the expert-parallel and expert-data-parallel groups (rank_layout.hpp), the embedding group (first and last pipeline stage; absent on the other stages) and the
// world, all from the communication layer (MPI or NCCL for the groups, solo for a group of one rank,
// MPI for the world). Built once from (world communicator, RankLayout), passed
// by const reference; no globals. Destroy it before MPI_Finalize.
#pragma once
#include <mpi.h>

#include <memory>

#include "comm/communicator.hpp"
#include "comm/host_comm.hpp"
#include "plan/buckets.hpp"
#include "plan/rank_layout.hpp"
#include "runtime/device.hpp"
#include "runtime/trace.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

struct CommOptions {
  bool synchronous_sends = false;  // debug.synchronous_sends
  // Where the buffers of the tp, cp, dp, pp and embedding groups live (null: the host). The world
  // communicator always moves host values (losses, norms, start-up and checkpoint agreement).
  Device* device = nullptr;
  bool nccl = false;                // NCCL for those groups (device must be a GPU), else MPI
  bool nccl_pipeline = false;       // with nccl: NCCL for the pp group too (nccl_pipeline_safe), else MPI
  bool stage_through_host = false;  // tests: the MPI backend's staging path on host memory
};

class ParallelState {
 public:
  // Collective over `world`: one communicator per axis, the embedding group and the world. watchdog
  // and trace (optional) see every operation of these communicators.
  ParallelState(HostComm world, const RankLayout& layout, const CommOptions& options = {}, Watchdog* watchdog = nullptr,
                Trace* trace = nullptr);
  ~ParallelState();

  const RankLayout& layout() const { return layout_; }
  HostComm world_comm() const { return world_comm_; }  // for start-up, configuration and checkpoint I/O
  bool pipeline_on_nccl() const { return pipeline_nccl_; }  // the pp group's messages go through NCCL
  Watchdog* watchdog() const { return watchdog_; }
  Trace* trace() const { return trace_; }
  int world_rank() const { return world_rank_; }
  const Coords& coords() const { return coords_; }
  Communicator& group(Axis a) const { return *groups_[static_cast<int>(a)]; }
  Communicator& tp() const { return group(Axis::tp); }
  Communicator& cp() const { return group(Axis::cp); }
  Communicator& dp() const { return group(Axis::dp); }
  Communicator& pp() const { return group(Axis::pp); }
  // The ranks holding the same parameters (data x context parallel, RankLayout::replica_group_of):
  // gradient reductions and the distributed optimizer's shards. The dp group itself when cp = 1.
  Communicator& replicas() const { return replicas_ ? *replicas_ : dp(); }
  Communicator& world() const { return *world_; }
  // Expert parallelism: the EP group (token dispatch) and the EDP group (expert gradients, expert
  // optimizer slices); with ep = 1 the EP group is this rank alone and the EDP group is dp x cp.
  Communicator& ep() const { return *ep_; }
  Communicator& edp() const { return edp_ ? *edp_ : replicas(); }  // replicas() when ep = 1
  // The group a gradient bucket is reduced (and sharded) over: edp for experts, else the replicas (dp x cp).
  Communicator& grad_group(const BucketSpan& b) const { return b.expert ? edp() : replicas(); }
  // The first and last pipeline stage of this rank's pipeline (the tied embedding); null elsewhere.
  Communicator* embedding() const { return embedding_.get(); }

  // The communicators this rank made by splitting world (MPI or NCCL; the world's own included):
  // groups of one rank are solo and need none.
  int split_communicators() const { return split_communicators_; }

 private:
  RankLayout layout_;
  HostComm world_comm_;
  bool pipeline_nccl_ = false;
  Watchdog* watchdog_;
  Trace* trace_;
  int world_rank_ = 0;
  int split_communicators_ = 0;
  Coords coords_;
  std::unique_ptr<Communicator> groups_[4];
  std::unique_ptr<Communicator> embedding_, replicas_, world_, ep_, edp_;
};

}  // namespace dtrain
