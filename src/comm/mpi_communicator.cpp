// MpiCommunicator: each operation is one nonblocking MPI call, waited for by comm/mpi_wait's polls,
// wrapped in the watchdog scope and the trace span, on the caller's buffers or on pinned host copies.
#include "comm/mpi_communicator.hpp"

#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>

#include "comm/mpi_wait.hpp"
#include "common/error.hpp"

namespace dtrain {
namespace {

// 16-bit reductions (bf16, fp16): widen, combine in fp32, round once (what NCCL does for both).
template <typename S>
void sum_16(void* in, void* inout, int* len, MPI_Datatype*) {
  const S* a = static_cast<const S*>(in);
  S* b = static_cast<S*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = from_float<S>(to_float(a[i]) + to_float(b[i]));
}
template <typename S>
void max_16(void* in, void* inout, int* len, MPI_Datatype*) {
  const S* a = static_cast<const S*>(in);
  S* b = static_cast<S*>(inout);
  for (int i = 0; i < *len; ++i)
    if (to_float(a[i]) > to_float(b[i])) b[i] = a[i];
}

// The sum and max operations of S, created once, after MPI_Init (the first communicator is built
// after it); freed by MPI_Finalize.
template <typename S>
MPI_Op op_16(ReduceOp op) {
  static const std::array<MPI_Op, 2> ops = [] {
    MPI_Op sum, max;
    MPI_CHECK(MPI_Op_create(&sum_16<S>, /*commute=*/1, &sum));
    MPI_CHECK(MPI_Op_create(&max_16<S>, /*commute=*/1, &max));
    return std::array<MPI_Op, 2>{sum, max};
  }();
  return ops[op == ReduceOp::max ? 1 : 0];
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;  // moved as bits; reduced by op_16's operations
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t == DType::bf16) return op_16<bf16>(op);
  if (t == DType::f16) return op_16<fp16>(op);
  return op == ReduceOp::max ? MPI_MAX : MPI_SUM;
}

int checked_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX))
    fatal("internal error: an MPI message of " + std::to_string(count) + " elements (the plan keeps them below 2^31)");
  return static_cast<int>(count);
}

// MPI's int counts and displacements of an all-to-all's blocks, refused beyond int range.
std::vector<int> checked_counts(const std::vector<std::size_t>& v) {
  std::vector<int> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = checked_count(v[i]);
  return out;
}

// A request on one or two MPI_Requests: wait and test report to the watchdog; `then` runs once all
// completed.
class MpiRequest final : public CommRequest::Impl {
 public:
  MpiRequest(std::vector<MPI_Request> requests, Watchdog* watchdog, const OpInfo& info, std::function<void()> then)
      : requests_(std::move(requests)), watchdog_(watchdog), info_(info), then_(std::move(then)) {}
  bool test() override {
    int done = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
    if (done) finish();
    return done != 0;
  }
  void wait() override {
    {
      auto w = watch(watchdog_, info_);
      mpi_wait_all(static_cast<int>(requests_.size()), requests_.data());
    }
    finish();
  }

 private:
  void finish() {
    if (then_) then_();
    then_ = nullptr;
  }
  std::vector<MPI_Request> requests_;
  Watchdog* watchdog_;
  OpInfo info_;
  std::function<void()> then_;
};

}  // namespace

StagingPool::Lease StagingPool::acquire(std::size_t bytes) {
  int free_slot = -1;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (!slots_[i]->busy && slots_[i]->buffer.bytes() >= bytes) {
      free_slot = static_cast<int>(i);
      break;
    }
  if (free_slot < 0) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->buffer = PinnedBuffer(device_, bytes);
    free_slot = static_cast<int>(slots_.size()) - 1;
  }
  Slot& s = *slots_[static_cast<std::size_t>(free_slot)];
  s.busy = true;
  return {s.buffer.as<void>(), free_slot};
}

void StagingPool::release(int slot) { slots_.at(static_cast<std::size_t>(slot))->busy = false; }

MpiCommunicator::MpiCommunicator(std::string name, HostComm parent, int color, int key, std::vector<int> world_ranks,
                                 Watchdog* watchdog, Trace* trace, bool synchronous_sends, Device& buffers, bool stage_through_host)
    : Communicator(std::move(name), std::move(world_ranks)),
      watchdog_(watchdog),
      trace_(trace),
      synchronous_sends_(synchronous_sends),
      buffers_(buffers),
      staged_(!buffers.is_host() || stage_through_host),
      pool_(buffers) {
  MPI_CHECK(MPI_Comm_split(parent.mpi(), color, key, &comm_));
  if (comm_ == MPI_COMM_NULL) fatal("internal error: a communicator was built for a rank outside its group");
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  MPI_CHECK(MPI_Comm_size(comm_, &size));
  set_position(rank, size);
  int* ub = nullptr;
  int flag = 0;
  MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
  if (flag && ub) max_tag_ = *ub;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

OpInfo MpiCommunicator::info(const CommLabel& label, int peer, std::size_t bytes) const {
  return {label.what, name().c_str(), peer >= 0 ? world_ranks()[static_cast<std::size_t>(peer)] : -1, static_cast<long>(bytes),
          label.micro_batch, label.stage};
}

void MpiCommunicator::blocking(const CommLabel& label, int peer, std::size_t bytes, const char* kind,
                               const std::function<void(MPI_Request*)>& start) {
  auto w = watch(watchdog_, info(label, peer, bytes));
  Trace::Span span(trace_, label.what, kind);
  mpi_blocking(start);
}

CommRequest MpiCommunicator::pending(MPI_Request request, const CommLabel& label, int peer, std::size_t bytes,
                                     std::function<void()> then) {
  return CommRequest(std::make_unique<MpiRequest>(std::vector<MPI_Request>{request}, watchdog_, info(label, peer, bytes), std::move(then)));
}

MpiCommunicator::HostView MpiCommunicator::host_view(const void* device_ptr, std::size_t bytes, bool copy_in) {
  if (!staged_) return {const_cast<void*>(device_ptr), -1};
  const StagingPool::Lease lease = pool_.acquire(bytes);
  if (copy_in && bytes > 0) buffers_.copy(lease.data, device_ptr, bytes);
  return {lease.data, lease.slot};
}

void MpiCommunicator::done(const HostView& v, void* device_ptr, std::size_t out_offset, std::size_t out_bytes) {
  if (v.slot < 0) return;
  if (device_ptr && out_bytes > 0) buffers_.copy(static_cast<char*>(device_ptr) + out_offset, static_cast<char*>(v.data) + out_offset, out_bytes);
  pool_.release(v.slot);
}

CommRequest MpiCommunicator::all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const CommLabel& label, Completion c) {
  const int n = checked_count(count);
  const std::size_t bytes = count * dtype_bytes(t);
  const HostView h = host_view(buf, bytes, true);
  if (c == Completion::later) {
    MPI_Request req;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h.data, n, mpi_type(t), mpi_op(op, t), comm_, &req));
    return pending(req, label, -1, bytes, [this, h, buf, bytes] { done(h, buf, 0, bytes); });
  }
  blocking(label, -1, bytes, "comm", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h.data, n, mpi_type(t), mpi_op(op, t), comm_, r));
  });
  done(h, buf, 0, bytes);
  return {};
}

void MpiCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) {
  const int n = checked_count(count);
  const std::size_t bytes = count * dtype_bytes(t), all = bytes * static_cast<std::size_t>(size());
  const HostView hs = host_view(send, bytes, true), hr = host_view(recv, all, false);
  blocking(label, -1, all, "comm", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallgather(hs.data, n, mpi_type(t), hr.data, n, mpi_type(t), comm_, r));
  });
  done(hs, nullptr, 0, 0);
  done(hr, recv, 0, all);
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) {
  const int n = checked_count(count);
  const std::size_t bytes = count * dtype_bytes(t), all = bytes * static_cast<std::size_t>(size());
  const HostView hs = host_view(send, all, true), hr = host_view(recv, bytes, false);
  blocking(label, -1, all, "comm", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Ireduce_scatter_block(hs.data, hr.data, n, mpi_type(t), mpi_op(ReduceOp::sum, t), comm_, r));
  });
  done(hs, nullptr, 0, 0);
  done(hr, recv, 0, bytes);
}

CommRequest MpiCommunicator::reduce_scatter_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) {
  const int n = checked_count(count);
  // MPI's in-place reduce-scatter leaves the result at the start of the buffer; it moves to this
  // rank's block so that arena offsets keep meaning the same tensor element.
  const std::size_t bytes = count * dtype_bytes(t), all = bytes * static_cast<std::size_t>(size());
  const std::size_t mine = bytes * static_cast<std::size_t>(rank());
  const HostView h = host_view(buf, all, true);
  auto finish = [this, h, buf, bytes, mine] {
    char* base = static_cast<char*>(h.data);
    if (mine != 0) std::memmove(base + mine, base, bytes);
    done(h, buf, mine, bytes);
  };
  if (c == Completion::later) {
    MPI_Request req;
    MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, h.data, n, mpi_type(t), mpi_op(ReduceOp::sum, t), comm_, &req));
    return pending(req, label, -1, all, finish);
  }
  blocking(label, -1, all, "comm", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, h.data, n, mpi_type(t), mpi_op(ReduceOp::sum, t), comm_, r));
  });
  finish();
  return {};
}

CommRequest MpiCommunicator::all_gather_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) {
  const int n = checked_count(count);
  const std::size_t bytes = count * dtype_bytes(t), all = bytes * static_cast<std::size_t>(size());
  const HostView h = host_view(buf, all, false);
  const std::size_t mine = bytes * static_cast<std::size_t>(rank());
  if (h.slot >= 0 && bytes > 0) buffers_.copy(static_cast<char*>(h.data) + mine, static_cast<const char*>(buf) + mine, bytes);
  if (c == Completion::later) {
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, mpi_type(t), h.data, n, mpi_type(t), comm_, &req));
    return pending(req, label, -1, all, [this, h, buf, all] { done(h, buf, 0, all); });
  }
  blocking(label, -1, all, "comm", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, mpi_type(t), h.data, n, mpi_type(t), comm_, r));
  });
  done(h, buf, 0, all);
  return {};
}

void MpiCommunicator::all_to_all_v(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DType t,
                                   const CommLabel& label) {
  const std::size_t n = static_cast<std::size_t>(size()), e = dtype_bytes(t);
  if (send_blocks.counts.size() != n || send_blocks.displs.size() != n || recv_blocks.counts.size() != n ||
      recv_blocks.displs.size() != n)
    fatal("internal error: all_to_all_v over " + name() + " needs " + std::to_string(n) + " blocks each way");
  const std::vector<int> sc = checked_counts(send_blocks.counts), sd = checked_counts(send_blocks.displs);
  const std::vector<int> rc = checked_counts(recv_blocks.counts), rd = checked_counts(recv_blocks.displs);
  const std::size_t send_bytes = send_blocks.extent() * e, recv_bytes = recv_blocks.extent() * e;
  const HostView hs = host_view(send, send_bytes, true), hr = host_view(recv, recv_bytes, false);
  {
    const AllToAllTimer timer(all_to_all_seconds_);
    blocking(label, -1, (send_blocks.total() + recv_blocks.total()) * e, "comm", [&](MPI_Request* r) {
      MPI_CHECK(MPI_Ialltoallv(hs.data, sc.data(), sd.data(), mpi_type(t), hr.data, rc.data(), rd.data(), mpi_type(t), comm_, r));
    });
  }
  done(hs, nullptr, 0, 0);
  if (hr.slot < 0) return;
  for (std::size_t r = 0; r < n; ++r)  // only the blocks: what lies between them is the caller's
    if (recv_blocks.counts[r] > 0)
      buffers_.copy(static_cast<char*>(recv) + recv_blocks.displs[r] * e, static_cast<char*>(hr.data) + recv_blocks.displs[r] * e,
                    recv_blocks.counts[r] * e);
  done(hr, nullptr, 0, 0);
}

std::vector<std::size_t> MpiCommunicator::exchange_counts(const std::vector<std::size_t>& send_counts, const CommLabel& label) {
  const std::size_t n = static_cast<std::size_t>(size());
  if (send_counts.size() % n != 0) fatal("internal error: exchange_counts over " + name() + " needs a multiple of its size");
  const int k = checked_count(send_counts.size() / n);
  std::vector<std::uint64_t> out(send_counts.begin(), send_counts.end()), in(send_counts.size());
  {
    const AllToAllTimer timer(all_to_all_seconds_);
    blocking(label, -1, 2 * out.size() * sizeof(std::uint64_t), "comm", [&](MPI_Request* r) {
      MPI_CHECK(MPI_Ialltoall(out.data(), k, MPI_UINT64_T, in.data(), k, MPI_UINT64_T, comm_, r));
    });
  }
  return {in.begin(), in.end()};
}

void MpiCommunicator::broadcast(void* buf, std::size_t count, DType t, int root, const CommLabel& label) {
  const std::size_t bytes = count * dtype_bytes(t);
  const HostView h = host_view(buf, bytes, rank() == root);
  blocking(label, root, bytes, "comm", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Ibcast(h.data, checked_count(count), mpi_type(t), root, comm_, r));
  });
  done(h, buf, 0, rank() == root ? 0 : bytes);
}

void MpiCommunicator::reduce(const void* send, void* recv, std::size_t count, DType t, int root, const CommLabel& label) {
  const std::size_t bytes = count * dtype_bytes(t);
  const bool is_root = rank() == root;
  const HostView hs = host_view(send, bytes, true);
  const HostView hr = is_root ? host_view(recv, bytes, false) : HostView{nullptr, -1};
  blocking(label, root, bytes, "comm", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Ireduce(hs.data, hr.data, checked_count(count), mpi_type(t), mpi_op(ReduceOp::sum, t), root, comm_, r));
  });
  done(hs, nullptr, 0, 0);
  if (is_root) done(hr, recv, 0, bytes);
}

void MpiCommunicator::recv(void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) {
  const std::size_t bytes = count * dtype_bytes(t);
  const HostView h = host_view(buf, bytes, false);
  blocking(label, peer, bytes, "p2p", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Irecv(h.data, checked_count(count), mpi_type(t), peer, tag, comm_, r));
  });
  done(h, buf, 0, bytes);
}

CommRequest MpiCommunicator::send(const void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) {
  MPI_Request req;
  const int n = checked_count(count);
  const std::size_t bytes = count * dtype_bytes(t);
  const HostView h = host_view(buf, bytes, true);
  if (synchronous_sends_)
    MPI_CHECK(MPI_Issend(h.data, n, mpi_type(t), peer, tag, comm_, &req));
  else
    MPI_CHECK(MPI_Isend(h.data, n, mpi_type(t), peer, tag, comm_, &req));
  return pending(req, label, peer, bytes, [this, h] { done(h, nullptr, 0, 0); });
}

CommRequest MpiCommunicator::exchange(const void* send, void* recv, std::size_t count, DType t, int send_peer, int recv_peer,
                                      int tag, const CommLabel& label, Completion c) {
  const int n = checked_count(count);
  const std::size_t bytes = count * dtype_bytes(t);
  const HostView hr = host_view(recv, bytes, false), hs = host_view(send, bytes, true);
  std::vector<MPI_Request> reqs(2);
  MPI_CHECK(MPI_Irecv(hr.data, n, mpi_type(t), recv_peer, tag, comm_, &reqs[0]));
  if (synchronous_sends_)
    MPI_CHECK(MPI_Issend(hs.data, n, mpi_type(t), send_peer, tag, comm_, &reqs[1]));
  else
    MPI_CHECK(MPI_Isend(hs.data, n, mpi_type(t), send_peer, tag, comm_, &reqs[1]));
  CommRequest r(std::make_unique<MpiRequest>(std::move(reqs), watchdog_, info(label, recv_peer, bytes), [this, hr, hs, recv, bytes] {
    done(hs, nullptr, 0, 0);
    done(hr, recv, 0, bytes);
  }));
  if (c == Completion::now) {
    Trace::Span span(trace_, label.what, "p2p");
    r.wait();
  }
  return r;
}

}  // namespace dtrain
