// The communication layer for a group of one rank (a parallel axis of size 1: tp, cp, dp, pp, ep, the
// embedding group of a one-stage pipeline). Nothing travels: reductions, broadcasts and the in-place
// collectives leave the buffer as it is; the out-of-place ones copy this rank's block from send to recv
// with the Device's copy (device to device on a GPU). No MPI communicator, no NCCL communicator, no
// stream: ParallelState builds one where a group has one member, and every group of an axis has the
// same size, so every rank skips the same collective splits.
#pragma once
#include <string>

#include "comm/communicator.hpp"
#include "runtime/device.hpp"

namespace dtrain {

class SoloCommunicator final : public Communicator {
 public:
  // world_rank: this rank (the group's only member); buffers: the device whose memory callers pass.
  SoloCommunicator(std::string name, int world_rank, Device& buffers);

  CommRequest all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const CommLabel& label, Completion c) override;
  void all_gather(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) override;
  CommRequest reduce_scatter_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) override;
  CommRequest all_gather_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) override;
  void all_to_all_v(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DType t,
                    const CommLabel& label) override;
  std::vector<std::size_t> exchange_counts(const std::vector<std::size_t>& send_counts, const CommLabel& label) override;
  void broadcast(void* buf, std::size_t count, DType t, int root, const CommLabel& label) override;
  void reduce(const void* send, void* recv, std::size_t count, DType t, int root, const CommLabel& label) override;
  // A send to oneself would have to wait for its own receive: no caller does it (the pipeline has no
  // messages at pp = 1), so send and recv are internal errors. A ring step of a one-rank ring is a copy.
  void recv(void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) override;
  CommRequest send(const void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) override;
  CommRequest exchange(const void* send, void* recv, std::size_t count, DType t, int send_peer, int recv_peer, int tag,
                       const CommLabel& label, Completion c) override;
  long max_tag() const override;  // no message ever carries a tag

 private:
  void copy(void* dst, const void* src, std::size_t bytes);  // skips empty and same-place copies
  void check_peer(int peer, const char* operation) const;    // fatal unless peer is 0, the only rank

  Device& buffers_;
};

}  // namespace dtrain
