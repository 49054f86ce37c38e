// The pipeline's outgoing messages: each send gets a buffer of its own that nothing else writes until
// the send has completed, so a stage never waits for a send in the middle of a step. Waiting for a send
// means waiting for the peer to post its receive; a stage that did so before posting the receives its
// peer is waiting on would deadlock whenever MPI does not buffer the message (synchronous sends,
// messages above the eager limit). Sends are completed only at the end of the step, when every
// receive of every stage has been posted. Buffers are reused once their send completes, so the pool
// grows only to the number of messages a stage can have in flight at once.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "runtime/trace.hpp"
#include "runtime/watchdog.hpp"

namespace dtrain {

class PipelineOutbox {
 public:
  // synchronous: send with MPI_Issend (completes only when matched), for tests that prove the
  // schedule does not rely on buffering.
  PipelineOutbox(std::size_t message_floats, bool synchronous) : floats_(message_floats), synchronous_(synchronous) {}
  ~PipelineOutbox();
  PipelineOutbox(const PipelineOutbox&) = delete;
  PipelineOutbox& operator=(const PipelineOutbox&) = delete;

  // A free buffer of message_floats for the next message (one whose earlier send has completed).
  float* buffer();
  // Starts sending the buffer returned by the last buffer() call.
  void send(int dest, int tag, MPI_Comm comm, const OpInfo& what);
  // Completes every send; returns the seconds spent waiting. Each wait is reported to the watchdog
  // with the peer and micro-batch it is for.
  double complete_all(Watchdog* watchdog, Trace* trace);

 private:
  struct Message {
    std::vector<float> data;
    MPI_Request request = MPI_REQUEST_NULL;
    OpInfo what;
  };
  std::size_t floats_;
  bool synchronous_;
  std::vector<Message> messages_;
  std::size_t current_ = 0;  // index of the buffer handed out by buffer()
};

}  // namespace dtrain
