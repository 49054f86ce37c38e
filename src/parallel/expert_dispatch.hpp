// ExpertDispatch: the movement of token rows between "the tokens of this rank" and "the rows of the
// experts this rank computes" in a MoE layer, forward and backward. With expert parallelism 1 nothing
// moves (LocalExpertDispatch); an all-to-all implementation over the expert-parallel group goes behind
// the same interface.
//
// Row orders (every buffer is rows of `width` elements of one DType, on the rank's device):
//   token side   (R, width): this rank's routed rows, expert-major over the E global experts (expert 0's
//                rows first), within an expert in token order (model/moe_routing.hpp); sent[e] rows
//                for expert e.
//   expert side  (Rl, width): the rows this rank's E/ep local experts compute, local-expert-major;
//                within a local expert by source rank (ep order), each source's rows in its own order.
//                Rl = sum of local_rows().
// to_experts (forward dispatch) and from_experts (forward combine) are permutations of rows across
// ranks, so each is the other's backward: the gradient of the expert-side input goes back through
// from_experts, the gradient of the expert outputs reaches the experts through to_experts.
#pragma once
#include <vector>

#include "comm/communicator.hpp"

namespace dtrain {

// Where one micro-batch's rows go, decided once per MoE layer and micro-batch, kept for its backward.
struct ExpertLayout {
  std::vector<long> sent;      // (E) token-side rows per global expert
  std::vector<long> received;  // (ep, E/ep) rows each source rank sends to each local expert
  int ep = 1;
  // (E/ep) expert-side rows per local expert: the sum over source ranks.
  std::vector<long> local_rows() const;
  long token_rows() const;   // R
  long expert_rows() const;  // Rl
};

class ExpertDispatch {
 public:
  virtual ~ExpertDispatch() = default;
  // Collective over the expert-parallel group: every rank's sent counts -> the layout.
  virtual ExpertLayout plan(const std::vector<long>& sent) = 0;
  // Token side (R, width) -> expert side (Rl, width). Returns `rows` itself when nothing moves, else
  // `buffer` (room for Rl rows) filled.
  virtual const void* to_experts(const ExpertLayout& layout, const void* rows, void* buffer, int width, DType type) = 0;
  // Expert side (Rl, width) -> token side (R, width); the same convention.
  virtual const void* from_experts(const ExpertLayout& layout, const void* rows, void* buffer, int width, DType type) = 0;
};

// Expert parallelism 1: every expert is local, the token side is the expert side (pointer reuse).
class LocalExpertDispatch final : public ExpertDispatch {
 public:
  ExpertLayout plan(const std::vector<long>& sent) override;
  const void* to_experts(const ExpertLayout&, const void* rows, void*, int, DType) override { return rows; }
  const void* from_experts(const ExpertLayout&, const void* rows, void*, int, DType) override { return rows; }
};

}  // namespace dtrain
