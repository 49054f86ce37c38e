// TokenSource: the one interface through which sample selection reads training tokens, whatever
// their format on disk (a dtrain token file, a Megatron indexed dataset).
#pragma once
#include <algorithm>
#include <cstdint>

namespace dtrain {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Tokens in the stream.
  virtual std::uint64_t size() const = 0;
  // Tokens [start, start + len) of the stream as int; throws std::out_of_range past the end.
  virtual void read(std::uint64_t start, int len, int* out /*(len)*/) const = 0;
  // Whether a loss mask came with the tokens (dtrain-data --sft writes one beside them).
  virtual bool has_loss_mask() const { return false; }
  // The loss mask of tokens [start, start + len): 1 where the token is a target the loss trains on, 0
  // where it is not (a prompt); all 1 without a mask.
  virtual void read_loss_mask(std::uint64_t, int len, std::uint8_t* out /*(len)*/) const { std::fill(out, out + len, 1); }

 protected:
  TokenSource() = default;
  TokenSource(const TokenSource&) = default;
  TokenSource& operator=(const TokenSource&) = default;
};

}  // namespace dtrain
