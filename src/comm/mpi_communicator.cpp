// MpiCommunicator: each operation is one MPI call, wrapped in the watchdog scope and the trace span.
#include "comm/mpi_communicator.hpp"

#include <climits>
#include <cstring>
#include <functional>

#include "common/error.hpp"

namespace dtrain {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT;
    case DType::bf16: return MPI_UINT16_T;  // moved, never reduced by MPI (reductions of bf16 are refused)
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

int checked_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX))
    fatal("internal error: an MPI message of " + std::to_string(count) + " elements (the plan keeps them below 2^31)");
  return static_cast<int>(count);
}

void check_reducible(DType t) {
  if (t == DType::bf16) fatal("internal error: MPI cannot reduce bf16 values; reduce them in fp32");
}

// A request on an MPI_Request: wait and test report to the watchdog; `then` runs once it completed.
class MpiRequest final : public CommRequest::Impl {
 public:
  MpiRequest(MPI_Request request, Watchdog* watchdog, const OpInfo& info, std::function<void()> then)
      : request_(request), watchdog_(watchdog), info_(info), then_(std::move(then)) {}
  bool test() override {
    int done = 0;
    MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    if (done) finish();
    return done != 0;
  }
  void wait() override {
    if (request_ != MPI_REQUEST_NULL) {
      auto w = watch(watchdog_, info_);
      MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
    }
    finish();
  }

 private:
  void finish() {
    if (then_) then_();
    then_ = nullptr;
  }
  MPI_Request request_;
  Watchdog* watchdog_;
  OpInfo info_;
  std::function<void()> then_;
};

}  // namespace

MpiCommunicator::MpiCommunicator(std::string name, MPI_Comm parent, int color, int key, std::vector<int> world_ranks,
                                 Watchdog* watchdog, Trace* trace, bool synchronous_sends)
    : Communicator(std::move(name), std::move(world_ranks)),
      watchdog_(watchdog),
      trace_(trace),
      synchronous_sends_(synchronous_sends) {
  MPI_CHECK(MPI_Comm_split(parent, color, key, &comm_));
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

CommRequest MpiCommunicator::pending(MPI_Request request, const CommLabel& label, int peer, std::size_t bytes,
                                     std::function<void()> then) {
  return CommRequest(std::make_unique<MpiRequest>(request, watchdog_, info(label, peer, bytes), std::move(then)));
}

CommRequest MpiCommunicator::all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const CommLabel& label, Completion c) {
  check_reducible(t);
  const int n = checked_count(count);
  if (c == Completion::later) {
    MPI_Request req;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, n, mpi_type(t), mpi_op(op), comm_, &req));
    return pending(req, label, -1, count * dtype_bytes(t));
  }
  auto w = watch(watchdog_, info(label, -1, count * dtype_bytes(t)));
  Trace::Span span(trace_, label.what, "comm");
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, mpi_type(t), mpi_op(op), comm_));
  return {};
}

void MpiCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) {
  const int n = checked_count(count);
  auto w = watch(watchdog_, info(label, -1, count * dtype_bytes(t) * static_cast<std::size_t>(size())));
  Trace::Span span(trace_, label.what, "comm");
  MPI_CHECK(MPI_Allgather(send, n, mpi_type(t), recv, n, mpi_type(t), comm_));
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType t, const CommLabel& label) {
  check_reducible(t);
  const int n = checked_count(count);
  auto w = watch(watchdog_, info(label, -1, count * dtype_bytes(t) * static_cast<std::size_t>(size())));
  Trace::Span span(trace_, label.what, "comm");
  MPI_CHECK(MPI_Reduce_scatter_block(send, recv, n, mpi_type(t), MPI_SUM, comm_));
}

CommRequest MpiCommunicator::reduce_scatter_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) {
  check_reducible(t);
  const int n = checked_count(count);
  // MPI's in-place reduce-scatter leaves the result at the start of the buffer; it moves to this
  // rank's block so that arena offsets keep meaning the same tensor element.
  const std::size_t bytes = count * dtype_bytes(t);
  char* base = static_cast<char*>(buf);
  char* mine = base + bytes * static_cast<std::size_t>(rank());
  auto move_home = [base, mine, bytes] {
    if (mine != base) std::memmove(mine, base, bytes);
  };
  if (c == Completion::later) {
    MPI_Request req;
    MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, n, mpi_type(t), MPI_SUM, comm_, &req));
    return pending(req, label, -1, bytes * static_cast<std::size_t>(size()), move_home);
  }
  auto w = watch(watchdog_, info(label, -1, bytes * static_cast<std::size_t>(size())));
  Trace::Span span(trace_, label.what, "comm");
  MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, n, mpi_type(t), MPI_SUM, comm_));
  move_home();
  return {};
}

CommRequest MpiCommunicator::all_gather_in_place(void* buf, std::size_t count, DType t, const CommLabel& label, Completion c) {
  const int n = checked_count(count);
  const std::size_t bytes = count * dtype_bytes(t) * static_cast<std::size_t>(size());
  if (c == Completion::later) {
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, mpi_type(t), buf, n, mpi_type(t), comm_, &req));
    return pending(req, label, -1, bytes);
  }
  auto w = watch(watchdog_, info(label, -1, bytes));
  Trace::Span span(trace_, label.what, "comm");
  MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, mpi_type(t), buf, n, mpi_type(t), comm_));
  return {};
}

void MpiCommunicator::broadcast(void* buf, std::size_t count, DType t, int root, const CommLabel& label) {
  auto w = watch(watchdog_, info(label, root, count * dtype_bytes(t)));
  Trace::Span span(trace_, label.what, "comm");
  MPI_CHECK(MPI_Bcast(buf, checked_count(count), mpi_type(t), root, comm_));
}

void MpiCommunicator::reduce(const void* send, void* recv, std::size_t count, DType t, int root, const CommLabel& label) {
  check_reducible(t);
  auto w = watch(watchdog_, info(label, root, count * dtype_bytes(t)));
  Trace::Span span(trace_, label.what, "comm");
  MPI_CHECK(MPI_Reduce(send, rank() == root ? recv : nullptr, checked_count(count), mpi_type(t), MPI_SUM, root, comm_));
}

void MpiCommunicator::recv(void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) {
  auto w = watch(watchdog_, info(label, peer, count * dtype_bytes(t)));
  Trace::Span span(trace_, label.what, "p2p");
  MPI_CHECK(MPI_Recv(buf, checked_count(count), mpi_type(t), peer, tag, comm_, MPI_STATUS_IGNORE));
}

CommRequest MpiCommunicator::send(const void* buf, std::size_t count, DType t, int peer, int tag, const CommLabel& label) {
  MPI_Request req;
  const int n = checked_count(count);
  if (synchronous_sends_)
    MPI_CHECK(MPI_Issend(buf, n, mpi_type(t), peer, tag, comm_, &req));
  else
    MPI_CHECK(MPI_Isend(buf, n, mpi_type(t), peer, tag, comm_, &req));
  return pending(req, label, peer, count * dtype_bytes(t));
}

}  // namespace dtrain
