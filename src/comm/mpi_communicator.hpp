// The MPI backend of the communication layer: one MPI communicator per group (split from a parent),
// host buffers. Counts above MPI's int range are refused (the plan keeps every message below it).
#pragma once
#include <mpi.h>

#include <functional>

#include "comm/communicator.hpp"
#include "runtime/trace.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over parent: ranks with the same colour form the group, ordered by key. watchdog and
  // trace may be null. synchronous_sends: sends use MPI_Issend (tests that prove nothing relies on
  // MPI buffering).
  MpiCommunicator(std::string name, MPI_Comm parent, int color, int key, std::vector<int> world_ranks, Watchdog* watchdog,
                  Trace* trace, bool synchronous_sends);
  ~MpiCommunicator() override;
  MPI_Comm comm() const { return comm_; }

  CommRequest all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const CommLabel& label, Completion c) override;
  void all_gather(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) override;
  CommRequest reduce_scatter_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) override;
  CommRequest all_gather_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) override;
  void broadcast(void* buf, std::size_t count, DType t, int root, const CommLabel& label) override;
  void reduce(const void* send, void* recv, std::size_t count, DType t, int root, const CommLabel& label) override;
  void recv(void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) override;
  CommRequest send(const void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) override;
  long max_tag() const override { return max_tag_; }

 private:
  // The watchdog's description of an operation of this group.
  OpInfo info(const CommLabel& label, int peer, std::size_t bytes) const;
  CommRequest pending(MPI_Request request, const CommLabel& label, int peer, std::size_t bytes, std::function<void()> then = {});

  MPI_Comm comm_ = MPI_COMM_NULL;
  Watchdog* watchdog_;
  Trace* trace_;
  bool synchronous_sends_;
  long max_tag_ = 32767;
};

}  // namespace dtrain
