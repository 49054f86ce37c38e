// The communication layer: everything the parallel code needs from a group of ranks (a tensor-,
// data-, expert- or pipeline-parallel group, the embedding group, the world), behind one interface with two
// backends: MPI (host buffers, or device buffers staged through pinned host memory) and NCCL (device
// buffers). Every operation reports itself to the hang watchdog and the trace inside the layer, so a
// call site says once what it waits for (a CommLabel) and the report adds the group, the peer, the
// bytes.
//
// Counts are elements. A call completes now (Completion::now, the default) or returns a CommRequest
// to wait on (Completion::later), which the caller waits for before touching the buffer. Every rank
// of a group calls the collectives in the same order.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/storage_type.hpp"
#include "config/choices.hpp"

namespace dtrain {

enum class DType { f32, f64, i32, bf16, f16 };
std::size_t dtype_bytes(DType t);
// The DType of a C++ element type.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }
template <>
constexpr DType dtype_of<int>() { return DType::i32; }
template <>
constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <>
constexpr DType dtype_of<fp16>() { return DType::f16; }
// The DType of the model's compute tensors in a run of this precision.
inline DType storage_dtype(Precision p) {
  p = storage_precision(p);
  return p == Precision::bf16 ? DType::bf16 : p == Precision::fp16 ? DType::f16 : DType::f32;
}

enum class ReduceOp { sum, max };
enum class Completion { now, later };

// Where each rank's block lies in an all-to-all buffer: counts[r] elements starting at element displs[r].
struct Blocks {
  std::vector<std::size_t> counts, displs;
  // Blocks back to back in rank order.
  static Blocks packed(std::vector<std::size_t> counts);
  std::size_t extent() const;  // elements from the buffer's start to the end of its last block
  std::size_t total() const;   // the sum of counts
};

// What a call is for, as the watchdog and the trace name it ("allreduce gradients", "recv activation").
struct CommLabel {
  const char* what = "";
  int micro_batch = -1;
  int stage = -1;
};

// An operation in flight. wait() completes it (reported to the watchdog while it waits); test()
// advances it and says whether it is complete. An empty request is complete. Destroying a pending
// request waits for it.
class CommRequest {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual bool test() = 0;
    virtual void wait() = 0;
  };
  CommRequest() = default;
  explicit CommRequest(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  CommRequest(CommRequest&&) noexcept = default;
  CommRequest& operator=(CommRequest&& o) noexcept;
  ~CommRequest();
  bool pending() const { return impl_ != nullptr; }
  bool test();
  void wait();

 private:
  std::unique_ptr<Impl> impl_;
};

// Adds the seconds of its lifetime to a counter (Communicator::all_to_all_seconds).
class AllToAllTimer {
 public:
  explicit AllToAllTimer(double& total);
  ~AllToAllTimer();
  AllToAllTimer(const AllToAllTimer&) = delete;
  AllToAllTimer& operator=(const AllToAllTimer&) = delete;

 private:
  double& total_;
  double start_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  const std::string& name() const { return name_; }  // "tp", "dp", "pp", "embedding", "world", ...
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }  // world rank of each group rank

  // buf (count) <- the reduction over the group of every rank's buf.
  virtual CommRequest all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const CommLabel& label,
                                 Completion c = Completion::now) = 0;
  // recv (size x count) <- every rank's send (count), in rank order.
  virtual void all_gather(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) = 0;
  // recv (count) <- this rank's block of the sum over the group of send (size x count).
  virtual void reduce_scatter(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) = 0;
  // In place over buf (size x count): afterwards block r (elements [r*count, (r+1)*count)) of rank r holds
  // the sum over the group of everyone's block r; the other blocks are undefined.
  virtual CommRequest reduce_scatter_in_place(void* buf, std::size_t count, DType t, const CommLabel& label,
                                              Completion c = Completion::now) = 0;
  // In place over buf (size x count): afterwards every block r holds rank r's block r.
  virtual CommRequest all_gather_in_place(void* buf, std::size_t count, DType t, const CommLabel& label,
                                          Completion c = Completion::now) = 0;
  // Every rank sends its send block r to rank r and receives rank r's block into its recv block r; a
  // block may be empty. Both Blocks have size() entries; a receiver must know its counts first
  // (exchange_counts).
  virtual void all_to_all_v(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DType t,
                            const CommLabel& label) = 0;
  // Host values, size() x k: block r (k counts) goes to rank r; the result's block r is what rank r sent
  // to this rank. How a receiver of all_to_all_v learns what comes.
  virtual std::vector<std::size_t> exchange_counts(const std::vector<std::size_t>& send_counts, const CommLabel& label) = 0;
  // Seconds the host has spent in this group's all_to_all_v and exchange_counts so far (the
  // dispatcher's share of a step; on NCCL only the launches, the transfer itself overlaps).
  double all_to_all_seconds() const { return all_to_all_seconds_; }
  virtual void broadcast(void* buf, std::size_t count, DType t, int root, const CommLabel& label) = 0;
  // recv (count, on root only) <- the sum over the group of send.
  virtual void reduce(const void* send, void* recv, std::size_t count, DType t, int root, const CommLabel& label) = 0;

  // Point to point with the group's rank `peer`; tags below max_tag(). A send may complete before its
  // receive is posted (MPI may buffer it) or only when it is matched: callers never rely on either.
  virtual void recv(void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) = 0;
  virtual CommRequest send(const void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) = 0;
  // A ring step: sends `send` to send_peer and receives `recv` from recv_peer at once (the receive is
  // posted before the send starts, so it never relies on buffering). Completion::later returns the
  // request of both; recv is valid once it is waited for.
  virtual CommRequest exchange(const void* send, void* recv, std::size_t count, DType t, int send_peer, int recv_peer, int tag,
                               const CommLabel& label, Completion c = Completion::now) = 0;
  // A backend may hold a send back to launch it together with the group's next receive (NCCL, whose
  // sends complete only when matched); flush_sends launches the held sends now. MPI starts every send
  // at once and has nothing to flush.
  virtual void flush_sends() {}
  virtual long max_tag() const = 0;

 protected:
  Communicator(std::string name, std::vector<int> world_ranks) : name_(std::move(name)), world_ranks_(std::move(world_ranks)) {}
  double all_to_all_seconds_ = 0.0;
  void set_position(int rank, int size) {
    rank_ = rank;
    size_ = size;
  }

 private:
  std::string name_;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;
};

}  // namespace dtrain
