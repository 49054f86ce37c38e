// PipelineOutbox: a pool of send buffers, each tied to its MPI request.
#include "parallel/pipeline_outbox.hpp"

#include <chrono>

#include "common/error.hpp"

namespace dtrain {

PipelineOutbox::~PipelineOutbox() {
  for (auto& m : messages_)
    if (m.request != MPI_REQUEST_NULL) MPI_Wait(&m.request, MPI_STATUS_IGNORE);
}

float* PipelineOutbox::buffer() {
  for (std::size_t i = 0; i < messages_.size(); ++i) {
    int done = 1;
    if (messages_[i].request != MPI_REQUEST_NULL) MPI_CHECK(MPI_Test(&messages_[i].request, &done, MPI_STATUS_IGNORE));
    if (done) {
      current_ = i;
      return messages_[i].data.data();
    }
  }
  messages_.push_back({std::vector<float>(floats_), MPI_REQUEST_NULL, {}});
  current_ = messages_.size() - 1;
  return messages_.back().data.data();
}

void PipelineOutbox::send(int dest, int tag, MPI_Comm comm, const OpInfo& what) {
  Message& m = messages_.at(current_);
  const int count = static_cast<int>(floats_);
  if (synchronous_)
    MPI_CHECK(MPI_Issend(m.data.data(), count, MPI_FLOAT, dest, tag, comm, &m.request));
  else
    MPI_CHECK(MPI_Isend(m.data.data(), count, MPI_FLOAT, dest, tag, comm, &m.request));
  m.what = what;
}

double PipelineOutbox::complete_all(Watchdog* watchdog, Trace* trace) {
  const auto t0 = std::chrono::steady_clock::now();
  Trace::Span span(trace, "wait sends", "p2p");
  for (auto& m : messages_) {
    if (m.request == MPI_REQUEST_NULL) continue;
    auto w = watch(watchdog, m.what);
    MPI_CHECK(MPI_Wait(&m.request, MPI_STATUS_IGNORE));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace dtrain
