// TokenSource: the one interface through which sample selection reads training tokens, whatever
// their format on disk (a dtrain token file, a Megatron indexed dataset).
#pragma once
#include <cstdint>

namespace dtrain {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Tokens in the stream.
  virtual std::uint64_t size() const = 0;
  // Tokens [start, start + len) of the stream as int; throws std::out_of_range past the end.
  virtual void read(std::uint64_t start, int len, int* out /*(len)*/) const = 0;

 protected:
  TokenSource() = default;
  TokenSource(const TokenSource&) = default;
  TokenSource& operator=(const TokenSource&) = default;
};

}  // namespace dtrain
