// The pipeline's outgoing messages: each send gets a buffer of its own that nothing else writes until
// the send has completed, so a stage never waits for a send in the middle of a step. Waiting for a send
// means waiting for the peer to post its receive; a stage that did so before posting the receives its
// peer is waiting on would deadlock whenever the transport does not buffer the message (synchronous
// sends, messages above the eager limit, NCCL). Sends are completed only at the end of the step, when
// every receive of every stage has been posted. Buffers (device memory) are reused once their send
// completes, so the pool grows, during the first steps only, to the number of messages a stage can
// have in flight at once.
#pragma once
#include <cstddef>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/arena.hpp"
#include "runtime/trace.hpp"

namespace dtrain {

class PipelineOutbox {
 public:
  PipelineOutbox(Communicator& pp, Device& device, DType type, std::size_t count)
      : pp_(pp), device_(device), type_(type), count_(count) {}

  // A free buffer of `count` elements for the next message (one whose earlier send has completed).
  void* buffer();
  // Starts sending the buffer returned by the last buffer() call to the group's rank `dest`.
  void send(int dest, int tag, const CommLabel& label);
  // Completes every send; returns the seconds spent waiting.
  double complete_all(Trace* trace);

 private:
  struct Message {
    Arena data;
    CommRequest request;
  };
  Communicator& pp_;
  Device& device_;
  DType type_;
  std::size_t count_;
  std::vector<Message> messages_;
  std::size_t current_ = 0;  // index of the buffer handed out by buffer()
};

}  // namespace dtrain
