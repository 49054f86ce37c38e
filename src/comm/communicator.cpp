// CommRequest and the element sizes.
#include "comm/communicator.hpp"

namespace dtrain {

std::size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::bf16: return 2;
  }
  return 1;
}

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
