// The MPI backend of the communication layer: one MPI communicator per group (split from a parent).
// Buffers in host memory are handed to MPI as they are; buffers in a GPU's memory are staged through
// pinned host buffers (copied out before the operation, back in when it completes), which is also how
// several ranks share one GPU. bf16 and fp16 are reduced with MPI operations of our own (fp32 arithmetic, one
// rounding per combination, as NCCL does). Counts above MPI's int range are refused (the plan keeps
// every message below it).
#pragma once
#include <mpi.h>

#include <functional>
#include <memory>

#include "comm/communicator.hpp"
#include "comm/host_comm.hpp"
#include "runtime/device.hpp"
#include "runtime/trace.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

// Pinned host buffers for staged operations, each busy until its operation completes; the pool grows
// to the number of operations in flight at once (during the first steps) and is reused after.
class StagingPool {
 public:
  explicit StagingPool(Device& device) : device_(device) {}
  struct Lease {
    void* data;
    int slot;
  };
  Lease acquire(std::size_t bytes);
  void release(int slot);

 private:
  struct Slot {
    PinnedBuffer buffer;
    bool busy = false;
  };
  Device& device_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

class MpiCommunicator final : public Communicator {
 public:
  // Collective over parent: ranks with the same colour form the group, ordered by key. watchdog and
  // trace may be null. buffers: the device whose memory the callers pass (host unless a GPU), staged
  // through pinned memory when it is not the host or when stage_through_host is set (tests).
  // synchronous_sends: sends use MPI_Issend (tests that prove nothing relies on MPI buffering).
  MpiCommunicator(std::string name, HostComm parent, int color, int key, std::vector<int> world_ranks, Watchdog* watchdog,
                  Trace* trace, bool synchronous_sends, Device& buffers, bool stage_through_host);
  ~MpiCommunicator() override;
  MPI_Comm comm() const { return comm_; }

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
  void recv(void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) override;
  CommRequest send(const void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) override;
  CommRequest exchange(const void* send, void* recv, std::size_t count, DType t, int send_peer, int recv_peer, int tag,
                       const CommLabel& label, Completion c) override;
  long max_tag() const override { return max_tag_; }

 private:
  // The watchdog's description of an operation of this group.
  OpInfo info(const CommLabel& label, int peer, std::size_t bytes) const;
  CommRequest pending(MPI_Request request, const CommLabel& label, int peer, std::size_t bytes, std::function<void()> then = {});
  // One blocking operation: `start` issues its nonblocking call into the request, which is waited for
  // (mpi_blocking) under the watchdog's watch and a trace span of `kind` ("comm", "p2p").
  void blocking(const CommLabel& label, int peer, std::size_t bytes, const char* kind, const std::function<void(MPI_Request*)>& start);
  // A host buffer of `bytes` standing for device memory at `device_ptr` (the memory itself when not
  // staged), holding its contents when copy_in. done() copies `out_bytes` at `out_offset` back and frees it.
  struct HostView {
    void* data;
    int slot;  // -1: not staged
  };
  HostView host_view(const void* device_ptr, std::size_t bytes, bool copy_in);
  void done(const HostView& v, void* device_ptr, std::size_t out_offset, std::size_t out_bytes);

  MPI_Comm comm_ = MPI_COMM_NULL;
  Watchdog* watchdog_;
  Trace* trace_;
  bool synchronous_sends_;
  Device& buffers_;
  bool staged_;
  StagingPool pool_;
  long max_tag_ = 32767;
};

}  // namespace dtrain
