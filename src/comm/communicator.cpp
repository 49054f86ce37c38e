// CommRequest, the element sizes and all-to-all block geometry.
#include "comm/communicator.hpp"

#include <algorithm>
#include <chrono>

namespace dtrain {

std::size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  return 1;
}

Blocks Blocks::packed(std::vector<std::size_t> counts) {
  Blocks b;
  b.displs.resize(counts.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    b.displs[r] = at;
    at += counts[r];
  }
  b.counts = std::move(counts);
  return b;
}

std::size_t Blocks::extent() const {
  std::size_t end = 0;
  for (std::size_t r = 0; r < counts.size(); ++r)
    if (counts[r] > 0) end = std::max(end, displs[r] + counts[r]);
  return end;
}

std::size_t Blocks::total() const {
  std::size_t sum = 0;
  for (std::size_t c : counts) sum += c;
  return sum;
}

namespace {
double now_seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

AllToAllTimer::AllToAllTimer(double& total) : total_(total), start_(now_seconds()) {}
AllToAllTimer::~AllToAllTimer() { total_ += now_seconds() - start_; }

CommRequest& CommRequest::operator=(CommRequest&& o) noexcept {
  if (this != &o) {
    if (impl_) impl_->wait();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

CommRequest::~CommRequest() {
  if (impl_) impl_->wait();
}

bool CommRequest::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  impl_.reset();
  return true;
}

void CommRequest::wait() {
  if (!impl_) return;
  impl_->wait();
  impl_.reset();
}

}  // namespace dtrain
