// PipelineOutbox: a pool of send buffers, each tied to its request.
#include "parallel/pipeline_outbox.hpp"

#include <chrono>

namespace dtrain {

void* PipelineOutbox::buffer() {
  for (std::size_t i = 0; i < messages_.size(); ++i)
    if (messages_[i].request.test()) {
      current_ = i;
      return messages_[i].data.data();
    }
  messages_.push_back({Arena(device_, count_ * dtype_bytes(type_)), CommRequest()});
  current_ = messages_.size() - 1;
  return messages_.back().data.data();
}

void PipelineOutbox::send(int dest, int tag, const CommLabel& label) {
  Message& m = messages_.at(current_);
  m.request = pp_.send(m.data.data(), count_, type_, dest, tag, label);
}

double PipelineOutbox::complete_all(Trace* trace) {
  const auto t0 = std::chrono::steady_clock::now();
  Trace::Span span(trace, "wait sends", "p2p");
  for (auto& m : messages_) m.request.wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace dtrain
