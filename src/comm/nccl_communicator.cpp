// NcclCommunicator: the communication layer on NCCL. Each group has its own CUDA stream; an operation
// first makes that stream wait for the compute (default) stream, so it sees every kernel queued before
// it, and Completion::now makes the compute stream wait for the operation, so later kernels see its
// result; neither blocks the host. Requests are CUDA events, waited for under the watchdog.
// Point-to-point: NCCL matches sends and receives between two ranks in the order they are issued and a
// send completes only when its receive runs. A send is therefore held back and launched together with
// the next receive of the group, in one ncclGroupStart/End (or on its own when waited for): the
// pipeline's send-forward/receive-backward pairs progress together, as Megatron's batched isend/irecv.
// The executor flushes every other send at once (flush_sends), so nothing else waits behind a held send.
// NCCL connects a pair of ranks lazily, inside the host call that ends the first group between them,
// and that call waits for the peer to reach its own; the pipeline group therefore connects to both
// ring neighbours at construction, where every rank of the group takes part at the same point.
#include "comm/nccl_communicator.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "common/cuda_check.hpp"
#include "common/error.hpp"

namespace dtrain {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::max ? ncclMax : ncclSum; }

// An event recorded on a stream; destroyed with the last owner.
struct Event {
  cudaEvent_t event = nullptr;
  ~Event() {
    if (event) cudaEventDestroy(event);
  }
};
std::shared_ptr<Event> record(cudaStream_t stream) {
  auto e = std::make_shared<Event>();
  CUDA_CHECK(cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(e->event, stream));
  return e;
}

// An error NCCL met asynchronously (a peer gone, a network failure), as a fatal error with NCCL's words.
void check_async_error(ncclComm_t comm, const OpInfo& info) {
  ncclResult_t async = ncclSuccess;
  NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess && async != ncclInProgress)
    fatal(std::string("NCCL failed during ") + info.name + " (group " + info.group + "): " + ncclGetErrorString(async) + ": " +
          ncclGetLastError(comm));
}

// Waits (host) for an event under the watchdog, watching the communicator for asynchronous errors,
// then orders the compute stream after it.
void wait_event(const Event& e, ncclComm_t comm, Watchdog* watchdog, const OpInfo& info) {
  auto w = watch(watchdog, info);
  for (;;) {
    const cudaError_t rc = cudaEventQuery(e.event);
    if (rc == cudaSuccess) break;
    if (rc != cudaErrorNotReady) CUDA_CHECK(rc);
    check_async_error(comm, info);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  CUDA_CHECK(cudaStreamWaitEvent(0, e.event, 0));
}

class NcclCommunicator;

// A send held back until the group's next receive (or until someone waits for it).
struct DeferredSend {
  const void* buf;
  std::size_t count;
  DType type;
  int peer;
  std::shared_ptr<std::shared_ptr<Event>> done;  // set when launched
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const std::string& name, HostComm parent, int color, int key, std::vector<int> world_ranks, Watchdog* watchdog,
                   bool connect_neighbours, Trace* trace)
      : Communicator(name, std::move(world_ranks)), watchdog_(watchdog), trace_(trace) {
    MPI_Comm group;
    MPI_CHECK(MPI_Comm_split(parent.mpi(), color, key, &group));
    int rank = 0, size = 0;
    MPI_CHECK(MPI_Comm_rank(group, &rank));
    MPI_CHECK(MPI_Comm_size(group, &size));
    set_position(rank, size);
    ncclUniqueId id;
    if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group));
    MPI_CHECK(MPI_Comm_free(&group));
    NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (connect_neighbours && size > 1) connect_ring_neighbours();
  }
  ~NcclCommunicator() override {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
      ncclCommAbort(comm_);  // a broken communicator: waiting for its stream could hang
      cudaStreamDestroy(stream_);
      return;
    }
    // Sends still held have no receive coming (every step completes its sends): drop them. What is
    // queued is waited for under the watchdog, so a peer that is gone is reported, not waited on forever.
    deferred_.clear();
    wait_event(*record(stream_), comm_, watchdog_, info({"shutdown"}, -1, 0));
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  CommRequest all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const CommLabel& label, Completion c) override {
    Trace::Span span(trace_, label.what, "comm");
    after_compute();
    NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(t), nccl_op(op), comm_, stream_));
    return finish(label, -1, count * dtype_bytes(t), c);
  }
  void all_gather(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) override {
    Trace::Span span(trace_, label.what, "comm");
    after_compute();
    NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(t), comm_, stream_));
    finish(label, -1, count * dtype_bytes(t) * size(), Completion::now);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) override {
    Trace::Span span(trace_, label.what, "comm");
    after_compute();
    NCCL_CHECK(ncclReduceScatter(send, recv, count, nccl_type(t), ncclSum, comm_, stream_));
    finish(label, -1, count * dtype_bytes(t) * size(), Completion::now);
  }
  CommRequest reduce_scatter_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) override {
    Trace::Span span(trace_, label.what, "comm");
    after_compute();
    // NCCL works in place when the result is the rank's own block of the input.
    char* mine = static_cast<char*>(buf) + count * dtype_bytes(t) * rank();
    NCCL_CHECK(ncclReduceScatter(buf, mine, count, nccl_type(t), ncclSum, comm_, stream_));
    return finish(label, -1, count * dtype_bytes(t) * size(), c);
  }
  CommRequest all_gather_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) override {
    Trace::Span span(trace_, label.what, "comm");
    after_compute();
    const char* mine = static_cast<const char*>(buf) + count * dtype_bytes(t) * rank();
    NCCL_CHECK(ncclAllGather(mine, buf, count, nccl_type(t), comm_, stream_));
    return finish(label, -1, count * dtype_bytes(t) * size(), c);
  }
  // One group of a send and a receive per peer with a non-empty block (NCCL has no all-to-all-v).
  void all_to_all_v(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DType t,
                    const CommLabel& label) override {
    Trace::Span span(trace_, label.what, "comm");
    const AllToAllTimer timer(all_to_all_seconds_);
    flush_sends();  // earlier sends of this group keep their place in NCCL's per-pair order
    after_compute();
    const std::size_t e = dtype_bytes(t);
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size(); ++r) {
      const std::size_t i = static_cast<std::size_t>(r);
      if (send_blocks.counts[i] > 0)
        NCCL_CHECK(ncclSend(static_cast<const char*>(send) + send_blocks.displs[i] * e, send_blocks.counts[i], nccl_type(t), r, comm_,
                            stream_));
      if (recv_blocks.counts[i] > 0)
        NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + recv_blocks.displs[i] * e, recv_blocks.counts[i], nccl_type(t), r, comm_,
                            stream_));
    }
    NCCL_CHECK(ncclGroupEnd());
    finish(label, -1, (send_blocks.total() + recv_blocks.total()) * e, Completion::now);
  }
  // Through a device copy of the counts (NCCL moves device memory); the host waits for the result.
  std::vector<std::size_t> exchange_counts(const std::vector<std::size_t>& send_counts, const CommLabel& label) override {
    const std::size_t n = static_cast<std::size_t>(size()), k = send_counts.size() / n, bytes = send_counts.size() * sizeof(std::uint64_t);
    std::vector<std::uint64_t> out(send_counts.begin(), send_counts.end()), in(send_counts.size());
    std::uint64_t* dev = nullptr;  // (2 x size x k): sent, then received
    CUDA_CHECK(cudaMalloc(&dev, 2 * bytes));
    CUDA_CHECK(cudaMemcpy(dev, out.data(), bytes, cudaMemcpyHostToDevice));
    Blocks blocks = Blocks::packed(std::vector<std::size_t>(n, k));
    all_to_all_v(dev, blocks, dev + send_counts.size(), blocks, DType::f64, label);  // 64-bit words moved as they are
    wait_event(*record(0), comm_, watchdog_, info(label, -1, 2 * bytes));
    CUDA_CHECK(cudaMemcpy(in.data(), dev + send_counts.size(), bytes, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(dev));
    return {in.begin(), in.end()};
  }
  void broadcast(void* buf, std::size_t count, DType t, int root, const CommLabel& label) override {
    Trace::Span span(trace_, label.what, "comm");
    after_compute();
    NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, stream_));
    finish(label, root, count * dtype_bytes(t), Completion::now);
  }
  void reduce(const void* send, void* recv, std::size_t count, DType t, int root, const CommLabel& label) override {
    Trace::Span span(trace_, label.what, "comm");
    after_compute();
    NCCL_CHECK(ncclReduce(send, recv, count, nccl_type(t), ncclSum, root, comm_, stream_));
    finish(label, root, count * dtype_bytes(t), Completion::now);
  }
  void recv(void* buf, std::size_t count, DType t, int peer, int, const CommLabel& label) override {
    Trace::Span span(trace_, label.what, "p2p");
    launch_group(peer, buf, count, t);
  }
  CommRequest send(const void* buf, std::size_t count, DType t, int peer, int, const CommLabel& label) override;
  CommRequest exchange(const void* send, void* recv, std::size_t count, DType t, int send_peer, int recv_peer, int,
                       const CommLabel& label, Completion c) override {
    Trace::Span span(trace_, label.what, "p2p");
    flush_sends();
    after_compute();
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(send, count, nccl_type(t), send_peer, comm_, stream_));
    NCCL_CHECK(ncclRecv(recv, count, nccl_type(t), recv_peer, comm_, stream_));
    NCCL_CHECK(ncclGroupEnd());
    return finish(label, recv_peer, count * dtype_bytes(t), c);
  }
  void flush_sends() override {
    if (!deferred_.empty()) launch_group(-1, nullptr, 0, DType::f32);
  }
  long max_tag() const override { return 1L << 30; }  // NCCL matches by order; tags only name messages

  // Launches the held-back sends, with a receive when buf is not null, as one group.
  void launch_group(int recv_peer, void* buf, std::size_t count, DType t) {
    after_compute();
    NCCL_CHECK(ncclGroupStart());
    for (const auto& s : deferred_) NCCL_CHECK(ncclSend(s.buf, s.count, nccl_type(s.type), s.peer, comm_, stream_));
    if (buf) NCCL_CHECK(ncclRecv(buf, count, nccl_type(t), recv_peer, comm_, stream_));
    NCCL_CHECK(ncclGroupEnd());
    const auto e = record(stream_);
    for (auto& s : deferred_) *s.done = e;
    deferred_.clear();
    if (buf) CUDA_CHECK(cudaStreamWaitEvent(0, e->event, 0));
  }

 private:
  friend class NcclSendRequest;
  // One float each way to the previous and the next rank (the same rank when there are two), in one
  // group: NCCL makes those connections now; the host waits until they are made.
  void connect_ring_neighbours() {
    const int prev = (rank() + size() - 1) % size(), next = (rank() + 1) % size();
    float* scratch = nullptr;  // (4): send next, send prev, receive from prev, receive from next
    CUDA_CHECK(cudaMalloc(&scratch, 4 * sizeof(float)));
    CUDA_CHECK(cudaMemset(scratch, 0, 4 * sizeof(float)));
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(scratch, 1, ncclFloat32, next, comm_, stream_));
    NCCL_CHECK(ncclSend(scratch + 1, 1, ncclFloat32, prev, comm_, stream_));
    NCCL_CHECK(ncclRecv(scratch + 2, 1, ncclFloat32, prev, comm_, stream_));
    NCCL_CHECK(ncclRecv(scratch + 3, 1, ncclFloat32, next, comm_, stream_));
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaFree(scratch));
  }
  // The group's stream waits for everything queued on the compute stream so far.
  void after_compute() {
    const auto e = record(0);
    CUDA_CHECK(cudaStreamWaitEvent(stream_, e->event, 0));
  }
  CommRequest finish(const CommLabel& label, int peer, std::size_t bytes, Completion c);
  OpInfo info(const CommLabel& label, int peer, std::size_t bytes) const {
    return {label.what, name().c_str(), peer >= 0 ? world_ranks()[static_cast<std::size_t>(peer)] : -1, static_cast<long>(bytes),
            label.micro_batch, label.stage};
  }

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  Watchdog* watchdog_;
  Trace* trace_;
  std::vector<DeferredSend> deferred_;
};

// A collective in flight: its event.
class NcclRequest final : public CommRequest::Impl {
 public:
  NcclRequest(std::shared_ptr<Event> e, ncclComm_t comm, Watchdog* watchdog, const OpInfo& info)
      : e_(std::move(e)), comm_(comm), watchdog_(watchdog), info_(info) {}
  bool test() override {
    const cudaError_t rc = cudaEventQuery(e_->event);
    if (rc != cudaSuccess && rc != cudaErrorNotReady) CUDA_CHECK(rc);
    if (rc == cudaSuccess) CUDA_CHECK(cudaStreamWaitEvent(0, e_->event, 0));
    return rc == cudaSuccess;
  }
  void wait() override { wait_event(*e_, comm_, watchdog_, info_); }

 private:
  std::shared_ptr<Event> e_;
  ncclComm_t comm_;
  Watchdog* watchdog_;
  OpInfo info_;
};

// A send: held back until launched; waiting for it launches it first.
class NcclSendRequest final : public CommRequest::Impl {
 public:
  NcclSendRequest(NcclCommunicator& owner, std::shared_ptr<std::shared_ptr<Event>> done, Watchdog* watchdog, const OpInfo& info)
      : owner_(owner), done_(std::move(done)), watchdog_(watchdog), info_(info) {}
  bool test() override {
    if (!*done_) return false;
    const cudaError_t rc = cudaEventQuery((*done_)->event);
    if (rc != cudaSuccess && rc != cudaErrorNotReady) CUDA_CHECK(rc);
    return rc == cudaSuccess;
  }
  void wait() override {
    if (!*done_) owner_.launch_group(-1, nullptr, 0, DType::f32);
    wait_event(**done_, owner_.comm_, watchdog_, info_);
  }

 private:
  NcclCommunicator& owner_;
  std::shared_ptr<std::shared_ptr<Event>> done_;
  Watchdog* watchdog_;
  OpInfo info_;
};

CommRequest NcclCommunicator::send(const void* buf, std::size_t count, DType t, int peer, int, const CommLabel& label) {
  auto done = std::make_shared<std::shared_ptr<Event>>();
  deferred_.push_back({buf, count, t, peer, done});
  return CommRequest(std::make_unique<NcclSendRequest>(*this, done, watchdog_, info(label, peer, count * dtype_bytes(t))));
}

CommRequest NcclCommunicator::finish(const CommLabel& label, int peer, std::size_t bytes, Completion c) {
  auto e = record(stream_);
  if (c == Completion::now) {
    CUDA_CHECK(cudaStreamWaitEvent(0, e->event, 0));
    return {};
  }
  return CommRequest(std::make_unique<NcclRequest>(std::move(e), comm_, watchdog_, info(label, peer, bytes)));
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const std::string& name, HostComm parent, int color, int key,
                                                     std::vector<int> world_ranks, bool connect_neighbours, Watchdog* watchdog,
                                                     Trace* trace) {
  return std::make_unique<NcclCommunicator>(name, parent, color, key, std::move(world_ranks), watchdog, connect_neighbours, trace);
}

}  // namespace dtrain
