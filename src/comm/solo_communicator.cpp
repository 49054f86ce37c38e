// SoloCommunicator: every operation of a one-rank group as the identity (or a copy), checked against
// the group's one rank.
#include "comm/solo_communicator.hpp"

#include <limits>

#include "common/error.hpp"

namespace dtrain {

SoloCommunicator::SoloCommunicator(std::string name, int world_rank, Device& buffers)
    : Communicator(std::move(name), {world_rank}), buffers_(buffers) {
  set_position(0, 1);
}

void SoloCommunicator::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) buffers_.copy(dst, src, bytes);
}

void SoloCommunicator::check_peer(int peer, const char* operation) const {
  if (peer != 0)
    fatal("internal error: " + std::string(operation) + " with rank " + std::to_string(peer) + " of the one-rank group " + name());
}

CommRequest SoloCommunicator::all_reduce(void*, std::size_t, DType, ReduceOp, const CommLabel&, Completion) { return {}; }

void SoloCommunicator::all_gather(const void* send, void* recv, std::size_t count, DType t, const CommLabel&) {
  copy(recv, send, count * dtype_bytes(t));
}

void SoloCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType t, const CommLabel&) {
  copy(recv, send, count * dtype_bytes(t));
}

CommRequest SoloCommunicator::reduce_scatter_in_place(void*, std::size_t, DType, const CommLabel&, Completion) { return {}; }

CommRequest SoloCommunicator::all_gather_in_place(void*, std::size_t, DType, const CommLabel&, Completion) { return {}; }

void SoloCommunicator::all_to_all_v(const void* send, const Blocks& send_blocks, void* recv, const Blocks& recv_blocks, DType t,
                                    const CommLabel&) {
  if (send_blocks.counts.size() != 1 || send_blocks.displs.size() != 1 || recv_blocks.counts.size() != 1 ||
      recv_blocks.displs.size() != 1 || send_blocks.counts[0] != recv_blocks.counts[0])
    fatal("internal error: all_to_all_v over the one-rank group " + name() + " needs one block each way, of the same count");
  const std::size_t e = dtype_bytes(t);
  copy(static_cast<char*>(recv) + recv_blocks.displs[0] * e, static_cast<const char*>(send) + send_blocks.displs[0] * e,
       send_blocks.counts[0] * e);
}

std::vector<std::size_t> SoloCommunicator::exchange_counts(const std::vector<std::size_t>& send_counts, const CommLabel&) {
  return send_counts;
}

void SoloCommunicator::broadcast(void*, std::size_t, DType, int root, const CommLabel&) { check_peer(root, "broadcast"); }

void SoloCommunicator::reduce(const void* send, void* recv, std::size_t count, DType t, int root, const CommLabel&) {
  check_peer(root, "reduce");
  copy(recv, send, count * dtype_bytes(t));
}

void SoloCommunicator::recv(void*, std::size_t, DType, int peer, int, const CommLabel&) {
  fatal("internal error: recv from rank " + std::to_string(peer) + " in the one-rank group " + name() + " (nothing sends to itself)");
}

CommRequest SoloCommunicator::send(const void*, std::size_t, DType, int peer, int, const CommLabel&) {
  fatal("internal error: send to rank " + std::to_string(peer) + " in the one-rank group " + name() + " (nothing sends to itself)");
}

CommRequest SoloCommunicator::exchange(const void* send, void* recv, std::size_t count, DType t, int send_peer, int recv_peer, int,
                                       const CommLabel&, Completion) {
  check_peer(send_peer, "exchange");
  check_peer(recv_peer, "exchange");
  copy(recv, send, count * dtype_bytes(t));
  return {};
}

long SoloCommunicator::max_tag() const { return std::numeric_limits<int>::max(); }

}  // namespace dtrain
